//! The input schema of a tool described by JSON Schema (an upstream MCP server's tool),
//! with its validator compiled at most once. Below `tool`, `params` and `upstream`, which
//! all hold or check one.

use std::fmt;
use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// An upstream tool's input schema and its validator, compiled at most once per tool:
/// at discovery ([`InputSchema::compiled`]), or on the first call for a tool that came
/// from a catalog document. Clones of a tool share the one validator; a tool that
/// discovery replaces is a new value with its own, so validators live exactly as long as
/// the tools holding them (no cache beside the catalog). Serializes as the schema alone;
/// two are equal when their schemas are.
#[derive(Clone)]
pub struct InputSchema {
    schema: Value,
    /// The validator, or why the schema does not compile.
    pub(crate) validator: Arc<OnceLock<Result<jsonschema::Validator, String>>>,
}

impl InputSchema {
    /// The schema, compiled now: `Err` is the compiler's reason.
    pub fn compiled(schema: Value) -> Result<Self, String> {
        let this = Self::from(schema);
        this.validator().map_err(str::to_string)?;
        Ok(this)
    }

    pub fn as_value(&self) -> &Value {
        &self.schema
    }

    pub(crate) fn validator(&self) -> Result<&jsonschema::Validator, &str> {
        self.validator
            .get_or_init(|| jsonschema::validator_for(&self.schema).map_err(|e| e.to_string()))
            .as_ref()
            .map_err(String::as_str)
    }
}

impl From<Value> for InputSchema {
    /// Compiled on first use.
    fn from(schema: Value) -> Self {
        Self {
            schema,
            validator: Arc::default(),
        }
    }
}

impl std::ops::Deref for InputSchema {
    type Target = Value;
    fn deref(&self) -> &Value {
        &self.schema
    }
}

impl PartialEq for InputSchema {
    fn eq(&self, other: &Self) -> bool {
        self.schema == other.schema
    }
}

impl fmt::Debug for InputSchema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.schema.fmt(f)
    }
}

impl Serialize for InputSchema {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.schema.serialize(s)
    }
}

impl<'de> Deserialize<'de> for InputSchema {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Value::deserialize(d).map(Self::from)
    }
}
