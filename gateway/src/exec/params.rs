//! The engine's own guard on a call's params: the engine never starts a process for
//! params that did not come out of [`mcc_catalog::params::validate`]. The rule itself is
//! [`mcc_catalog::params::check_validated`], next to `validate` (one definition of the
//! params rules); this module only names the tool in the error.

use serde_json::{Map, Value};

use mcc_catalog::Tool;

use super::ExecError;

pub fn check(tool: &Tool, params: &Map<String, Value>) -> Result<(), ExecError> {
    mcc_catalog::params::check_validated(tool, params).map_err(|p| ExecError::Params {
        tool: tool.key.clone(),
        param: p.param,
        problem: p.message,
    })
}
