//! The JSON shapes of the REST surface (what the OpenAPI document's schemas are
//! generated from), and their construction from the shared calls' outcomes.

use std::collections::HashMap;

use mcc_catalog::Tool;
use mcc_catalog::approval::Policy;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};

use crate::calls::executed::Ran;
use crate::calls::search::Found;
use crate::calls::view::WhoAmI;
use crate::exec::Outcome;

/// The tools the caller may run, sorted by key.
#[derive(Debug, Serialize, ToSchema)]
pub struct ToolList {
    pub tools: Vec<ToolInfo>,
}

/// One tool as a caller sees it (overridden params and an fn tool's `context` are hidden).
#[derive(Debug, Serialize, ToSchema)]
pub struct ToolInfo {
    /// Groups and name joined by dots: what `POST /v1/tools/{key}` takes.
    pub key: String,
    pub name: String,
    pub groups: Vec<String>,
    pub description: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub example: String,
    pub params: Vec<ParamInfo>,
    /// What a call returns, in MCC's notation (`str | (int, str, str)` for shell tools).
    pub returns: String,
    /// MCC's signature block, the text `search` shows (ending with `Approval: required`
    /// when `approval` is there).
    pub signature: String,
    /// `required` when a call of this tool needs a person's approval first (the tool's
    /// own `approval: required` or the platform's groups): `POST /v1/tools/{key}` then
    /// answers `428` with a ticket to approve. Absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval: Option<String>,
    /// MCP's tool annotations (title and hints), where the tool declares any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotations: Option<AnnotationsInfo>,
    /// The JSON Schema a successful `result` matches, where the tool declares one.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub output_schema: Option<Value>,
}

/// MCP's `ToolAnnotations`, under MCP's names: what the tool's author declares (hints
/// are not enforced). Each is absent unless declared.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AnnotationsInfo {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_only_hint: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub destructive_hint: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idempotent_hint: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub open_world_hint: Option<bool>,
}

/// One parameter a caller may pass.
#[derive(Debug, Serialize, ToSchema)]
pub struct ParamInfo {
    pub name: String,
    /// `str`, `int`, `float`, `bool`, `list` or `dict`.
    #[serde(rename = "type")]
    pub ty: String,
    pub required: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub description: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub example: Option<Value>,
}

impl ToolInfo {
    /// `tool` as a caller sees it, under the platform's approval `policy`.
    pub fn new(tool: &Tool, policy: &Policy) -> Self {
        ToolInfo {
            key: tool.key.clone(),
            name: tool.name.clone(),
            groups: tool.groups.clone(),
            description: tool.description.clone(),
            example: tool.example.clone(),
            params: tool
                .visible_params()
                .map(|p| ParamInfo {
                    name: p.name.clone(),
                    ty: p.ty.to_string(),
                    required: p.required,
                    default: p.default.clone(),
                    description: p.description.clone(),
                    example: p.example.clone(),
                })
                .collect(),
            returns: tool.signature_return_type().to_string(),
            signature: crate::calls::text::signature(tool, policy),
            approval: mcc_catalog::approval::required(tool, policy)
                .then(|| mcc_catalog::approval::REQUIRED.to_string()),
            annotations: (!tool.annotations.is_empty()).then(|| {
                let a = &tool.annotations;
                AnnotationsInfo {
                    title: a.title.clone(),
                    read_only_hint: a.read_only_hint,
                    destructive_hint: a.destructive_hint,
                    idempotent_hint: a.idempotent_hint,
                    open_world_hint: a.open_world_hint,
                }
            }),
            output_schema: tool.output_schema.clone(),
        }
    }
}

/// The body of `POST /v1/tools/{key}`: the tool's params by name (empty body: none).
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct ExecuteParams(HashMap<String, Value>);

/// What a tool run gave. HTTP 200 whenever the tool ran, whether it succeeded or not.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct ExecuteResult {
    /// `success` (exit code 0) or `failure` (non-zero exit, timeout, a failed callable).
    pub outcome: String,
    /// 0 on success; the tool's exit code on failure (-1: timeout or killed).
    pub exit_code: i32,
    /// Success: the tool's value (shell output that parses as JSON is that JSON, as in
    /// MCC); when `truncated`, the result text cut at the response limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// Failure: what the tool printed (absent when `truncated`; see `result`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stdout: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stderr: Option<String>,
    /// The result was over `server.response_max_size`: `result` holds MCP's text of it,
    /// cut, ending with `[Response truncated due to size limit]`.
    pub truncated: bool,
    /// The result came from the tool's result cache (`cache_ttl`).
    pub cached: bool,
    /// An upstream MCP server's tool: the content blocks it returned (text, images,
    /// resources), as MCP's JSON; absent when `truncated`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<Object>>)]
    pub content: Option<Vec<Value>>,
}

impl From<Ran> for ExecuteResult {
    fn from(ran: Ran) -> Self {
        let exit_code = ran.exit_code();
        let (outcome, mut result, mut stdout, mut stderr) = match ran.outcome {
            Outcome::Success(value) => ("success", Some(value), None, None),
            Outcome::Failure { stdout, stderr, .. } => {
                ("failure", None, Some(stdout), Some(stderr))
            }
        };
        let content = ran
            .upstream
            .filter(|_| !ran.truncated)
            .map(|reply| reply.content);
        if ran.truncated {
            result = ran.text.map(Value::String);
            stdout = None;
            stderr = None;
        }
        ExecuteResult {
            outcome: outcome.to_string(),
            exit_code,
            result,
            stdout,
            stderr,
            truncated: ran.truncated,
            cached: ran.cached,
            content,
        }
    }
}

/// `GET /v1/search`'s hits, best first.
#[derive(Debug, Serialize, ToSchema)]
pub struct SearchResults {
    pub results: Vec<SearchHit>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SearchHit {
    pub key: String,
    /// The fused keyword + semantic score (MCP shows it with two decimals).
    pub score: f64,
    /// MCC's signature block of the tool.
    pub signature: String,
}

impl From<Found> for SearchHit {
    fn from(f: Found) -> Self {
        SearchHit {
            key: f.key,
            score: f64::from(f.score),
            signature: f.signature,
        }
    }
}

/// Who the caller is.
#[derive(Debug, Serialize, ToSchema)]
pub struct WhoAmIBody {
    pub username: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    /// In stored order.
    pub groups: Vec<String>,
    /// Every key the caller may run, sorted.
    pub tools: Vec<String>,
}

impl From<WhoAmI<'_>> for WhoAmIBody {
    fn from(me: WhoAmI<'_>) -> Self {
        WhoAmIBody {
            username: me.user.username.clone(),
            email: me.user.email.clone().filter(|e| !e.is_empty()),
            groups: me.user.groups.clone(),
            tools: me.tools.into_iter().map(str::to_string).collect(),
        }
    }
}

/// `?format=` of `GET /v1/tools` (MCC's spelling; wins over `Accept`).
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// `json`, `md` (or `markdown`) or `html`.
    pub format: Option<String>,
    /// Comma-separated group names: only tools in every one of them (MCP's
    /// `describe_tools` `groups`).
    pub groups: Option<String>,
}

impl ListQuery {
    /// The `groups` filter as a list (empty: no filter).
    pub fn groups(&self) -> Vec<String> {
        self.groups
            .as_deref()
            .unwrap_or("")
            .split(',')
            .map(str::trim)
            .filter(|g| !g.is_empty())
            .map(str::to_string)
            .collect()
    }
}

/// `?session=` of `POST /v1/tools/{key}`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ExecuteQuery {
    /// A session handle from MCP's `new_session`: the tool gets that session's
    /// variables. Without it: the caller's default session.
    pub session: Option<String>,
    /// The ticket of a `428 approval_required` answer, sent back with the same key,
    /// params and session (docs/approval.md).
    pub approval_ticket: Option<String>,
    /// With `approval_ticket`: the person's decision, `approve` or `decline`.
    #[param(value_type = Option<String>)]
    pub approval: Option<super::approval::RestDecision>,
}

/// The query of `GET /v1/search`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SearchQuery {
    /// What the tool should do, in words.
    pub q: String,
    /// Leave out hits scoring below this.
    pub min_score: Option<f64>,
}
