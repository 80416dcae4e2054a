//! The engine's own guard on a call's params. Validation and coercion are
//! [`mcc_catalog::params::validate`]'s job (the gateway runs it first and shows its
//! message); this check only makes sure the engine never starts a process for params
//! that did not come out of it: every name declared, every required param present, every
//! value of its declared type (or the param's default/override, or `null` for an
//! optional param).

use serde_json::{Map, Value};

use mcc_catalog::{Param, ParamType, Tool};

use super::ExecError;

pub fn check(tool: &Tool, params: &Map<String, Value>) -> Result<(), ExecError> {
    let problem = |param: &str, problem: String| ExecError::Params {
        tool: tool.key.clone(),
        param: param.to_string(),
        problem,
    };
    for (name, value) in params {
        let Some(param) = tool.params.iter().find(|p| &p.name == name) else {
            return Err(problem(name, "is not a parameter of this tool".into()));
        };
        if !tool.is_visible(param) && param.override_value.is_none() {
            return Err(problem(
                name,
                "is injected by the gateway, not passed".into(),
            ));
        }
        if !acceptable(param, value) {
            return Err(problem(name, format!("expected {}, got {value}", param.ty)));
        }
    }
    if let Some(missing) = tool
        .visible_params()
        .find(|p| p.required && !params.contains_key(&p.name))
    {
        return Err(problem(&missing.name, "is required but missing".into()));
    }
    Ok(())
}

fn acceptable(param: &Param, value: &Value) -> bool {
    param.override_value.as_ref() == Some(value)
        || param.default.as_ref() == Some(value)
        || (value.is_null() && !param.required)
        || of_type(param.ty, value)
}

fn of_type(ty: ParamType, value: &Value) -> bool {
    match ty {
        ParamType::Str => value.is_string(),
        ParamType::Int => value.is_i64() || value.is_u64(),
        ParamType::Float => value.is_number(),
        ParamType::Bool => value.is_boolean(),
        ParamType::List => value.is_array(),
        ParamType::Dict => value.is_object(),
    }
}
