//! An upstream's `tools/call` result as the gateway carries it: the content blocks
//! (text, images, audio, resources, resource links) as the upstream sent them, its
//! structured content and `isError`. The MCP surface returns it as it came; REST and the
//! engine's [`Outcome`] read a value from it ([`UpstreamReply::outcome`]).

use serde_json::{Map, Value, json};

use crate::exec::outcome::Outcome;

/// One upstream result, verbatim (within the response bounds of the connection). Its
/// serde form carries a held call's result between replicas ([`super::held_remote`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct UpstreamReply {
    /// MCP content blocks, as JSON objects.
    pub content: Vec<Value>,
    pub structured: Option<Value>,
    pub is_error: bool,
}

impl UpstreamReply {
    /// From rmcp's result.
    pub fn from_result(result: rmcp::model::CallToolResult) -> Self {
        let content = result
            .content
            .iter()
            .filter_map(|c| serde_json::to_value(c).ok())
            .collect();
        Self {
            content,
            structured: result.structured_content,
            is_error: result.is_error.unwrap_or(false),
        }
    }

    /// The text blocks, joined by newlines.
    pub fn text(&self) -> String {
        let texts: Vec<&str> = self
            .content
            .iter()
            .filter(|c| c.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|c| c.get("text").and_then(Value::as_str))
            .collect();
        texts.join("\n")
    }

    fn only_text(&self) -> bool {
        self.content
            .iter()
            .all(|c| c.get("type").and_then(Value::as_str) == Some("text"))
    }

    /// The value REST, the cache key's outcome and the output-schema check read: the
    /// structured content when there is one, else the text when every block is text,
    /// else the content blocks. An `isError` result is a failure (code 1) whose stdout
    /// is the text.
    pub fn outcome(&self) -> Outcome {
        if self.is_error {
            return Outcome::Failure {
                code: 1,
                stdout: self.text(),
                stderr: String::new(),
            };
        }
        match &self.structured {
            Some(v) => Outcome::Success(v.clone()),
            None if self.only_text() => Outcome::Success(Value::String(self.text())),
            None => Outcome::Success(Value::Array(self.content.clone())),
        }
    }

    /// The form the result cache stores (successes only).
    pub fn to_cached(&self) -> Value {
        let mut m = Map::new();
        m.insert("content".into(), Value::Array(self.content.clone()));
        if let Some(s) = &self.structured {
            m.insert("structuredContent".into(), s.clone());
        }
        json!({ "mcc_upstream_reply": m })
    }

    /// Back from [`Self::to_cached`]; `None` for anything else.
    pub fn from_cached(value: &Value) -> Option<Self> {
        let m = value.get("mcc_upstream_reply")?.as_object()?;
        Some(Self {
            content: m.get("content")?.as_array()?.clone(),
            structured: m.get("structuredContent").cloned(),
            is_error: false,
        })
    }

    /// The reply as MCP's result, when it fits `limit` bytes serialized; `None` when it
    /// does not (the surface then sends the text, cut).
    pub fn to_mcp(&self, limit: usize) -> Option<rmcp::model::CallToolResult> {
        let content: Vec<rmcp::model::ContentBlock> = self
            .content
            .iter()
            .filter_map(|c| serde_json::from_value(c.clone()).ok())
            .collect();
        let size: usize = self
            .content
            .iter()
            .map(|c| c.to_string().len())
            .sum::<usize>()
            + self.structured.as_ref().map_or(0, |s| s.to_string().len());
        if size > limit {
            return None;
        }
        let mut result = if self.is_error {
            rmcp::model::CallToolResult::error(content)
        } else {
            rmcp::model::CallToolResult::success(content)
        };
        result.structured_content = self.structured.clone();
        Some(result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcome_reads_structured_then_text_then_blocks() {
        let text = json!({"type": "text", "text": "hi"});
        let image = json!({"type": "image", "data": "AA==", "mimeType": "image/png"});
        let r = UpstreamReply {
            content: vec![text.clone()],
            structured: None,
            is_error: false,
        };
        assert_eq!(r.outcome(), Outcome::Success(json!("hi")));
        let r = UpstreamReply {
            content: vec![text.clone(), image.clone()],
            structured: None,
            is_error: false,
        };
        assert_eq!(r.outcome(), Outcome::Success(json!([text, image])));
        let r = UpstreamReply {
            content: vec![text.clone()],
            structured: Some(json!({"n": 1})),
            is_error: false,
        };
        assert_eq!(r.outcome(), Outcome::Success(json!({"n": 1})));
        assert_eq!(UpstreamReply::from_cached(&r.to_cached()), Some(r.clone()));
        let e = UpstreamReply {
            is_error: true,
            ..r
        };
        assert!(
            matches!(e.outcome(), Outcome::Failure { code: 1, ref stdout, .. } if stdout == "hi")
        );
        assert!(e.to_mcp(10).is_none(), "over the limit");
        assert_eq!(e.to_mcp(1000).unwrap().is_error, Some(true));
    }
}
