//! The MCP server: the tools (`search`, `execute`, `whoami`, `describe_tools`,
//! `set_session`, `get_session`, `new_session`) and prompts agents call, over rmcp.
//!
//! - [`surface`]: definitions and prompt texts; [`crate::calls::text`]: the exact returned strings;
//! - [`resources`]: `mcc://` resources, [`list_changed`] their list's change
//!   notifications; [`completion`]: prompt argument completion;
//!   [`logging`]: `logging/setLevel` and a legacy session's log notifications;
//! - [`execute`]: the execute path, [`progress`] its progress notifications; [`ask`]:
//!   missing-parameter questions;
//! - [`legacy_sessions`]: the cross-replica MCP session registry; [`relay`]: legacy
//!   clients' answers (elicitation) reach the replica that asked, their cancellations the
//!   replica that runs the call; session variables are [`crate::session`]'s;
//! - [`jsonrpc`]: the JSON-RPC error bodies the layers in front of rmcp answer with.
//!
//! The caller comes from the request extensions (put there by [`crate::auth`]'s
//! middleware); this module never looks at credentials.

pub mod approval;
pub mod ask;
pub mod completion;
pub mod events;
pub mod execute;
pub mod input;
pub mod jsonrpc;
pub mod legacy_sessions;
pub mod list_changed;
pub mod logging;
pub mod progress;
pub mod relay;
pub mod resources;
pub mod session_owner;
pub mod surface;

/// The catalog of the completion and resource tests: `n` public tools `public.t000`…
/// with `description`, and one `admin.shell`.
#[cfg(test)]
fn test_catalog(n: usize, description: &str) -> crate::catalog::Catalog {
    let tool = |key: String, name: String, group: &str, description: &str| {
        serde_json::from_value(serde_json::json!({
            "key": key, "name": name, "groups": [group],
            "description": description, "kind": "exec", "command": "true"
        }))
        .unwrap()
    };
    let mut tools: Vec<mcc_catalog::Tool> = (0..n)
        .map(|i| {
            tool(
                format!("public.t{i:03}"),
                format!("t{i:03}"),
                "public",
                description,
            )
        })
        .collect();
    tools.push(tool("admin.shell".into(), "shell".into(), "admin", ""));
    crate::catalog::Catalog::new(tools, vec![])
}

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CompleteRequestParams, CompleteResult,
    ContentBlock, GetPromptRequestParams, GetPromptResponse, Implementation, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::auth::Identity;
use crate::calls::text;

/// The server name clients see (the reference's).
pub const SERVER_NAME: &str = "model-context-catalog (mcc)";

/// What every request handler shares, and who is calling: [`crate::calls`]' (the calls
/// MCP and REST both make).
pub use crate::calls::{CallCtx, Shared};

impl CallCtx {
    /// The caller of an MCP request and its `Mcp-Session-Id` (legacy clients).
    fn from_request(ctx: &RequestContext<RoleServer>) -> Self {
        let parts = ctx.extensions.get::<http::request::Parts>();
        // No caller in the extensions means no auth layer ran: treat as anonymous.
        let caller = parts
            .and_then(|p| p.extensions.get::<Identity>())
            .cloned()
            .unwrap_or_default();
        let mcp_session = parts
            .and_then(|p| p.headers.get("mcp-session-id"))
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        Self {
            caller,
            mcp_session,
        }
    }
}

/// The rmcp handler; one per MCP session or stateless request, all sharing [`Shared`].
#[derive(Clone)]
pub struct McpServer {
    shared: Arc<Shared>,
    /// The session's log level (legacy sessions: [`logging`]).
    log: logging::SessionLog,
    /// Where a legacy session registers for resource list changes.
    list_changed: Option<list_changed::ListChanged>,
}

impl McpServer {
    pub fn new(shared: Arc<Shared>) -> Self {
        Self {
            shared,
            log: logging::SessionLog::default(),
            list_changed: None,
        }
    }

    /// Its legacy sessions hear of resource list changes from `watch`.
    pub fn with_list_changed(mut self, watch: list_changed::ListChanged) -> Self {
        self.list_changed = Some(watch);
        self
    }
}

fn text_result(tool: &str, text: String) -> CallToolResponse {
    let mut result = CallToolResult::success(vec![ContentBlock::text(text.clone())]);
    if surface::wraps_result(tool) {
        result.structured_content = Some(serde_json::json!({ "result": text }));
    }
    result.into()
}

fn error_result(text: String) -> CallToolResponse {
    CallToolResult::error(vec![ContentBlock::text(text)]).into()
}

/// The arguments of an MCP tool, or the error text naming what is wrong with them.
fn parse<T: DeserializeOwned>(tool: &str, args: &Map<String, Value>) -> Result<T, String> {
    serde_json::from_value(Value::Object(args.clone()))
        .map_err(|e| format!("Invalid arguments for tool '{tool}': {e}"))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    query: String,
    #[serde(default)]
    min_score: Option<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DescribeArgs {
    #[serde(default)]
    groups: Option<Vec<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NoArgs {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SetArgs {
    name: String,
    value: Value,
    #[serde(default)]
    session: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GetArgs {
    name: String,
    #[serde(default)]
    session: Option<String>,
}

impl McpServer {
    async fn dispatch(
        &self,
        call: CallCtx,
        request: &CallToolRequestParams,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let args = request.arguments.clone().unwrap_or_default();
        let name = request.name.as_ref();
        let catalog = || self.shared.catalog.snapshot();
        let user = call.caller.user.as_ref();
        let result = match name {
            "search" => match parse::<SearchArgs>(name, &args) {
                Ok(a) => Ok(self.search(&call, a).await),
                Err(e) => Err(self.invalid_arguments(&call, name, &args, e)),
            },
            "describe_tools" => parse::<DescribeArgs>(name, &args).map(|a| {
                let groups = a.groups.unwrap_or_default();
                text_result(
                    name,
                    text::describe_tools(&catalog(), &self.shared.approvals.policy, user, &groups),
                )
            }),
            "whoami" => parse::<NoArgs>(name, &args)
                .map(|_| text_result(name, text::whoami(&catalog(), user))),
            "set_session" => match parse::<SetArgs>(name, &args) {
                Ok(_) if !args.contains_key("value") => Err(
                    "Invalid arguments for tool 'set_session': missing field `value`".to_string(),
                ),
                Ok(a) => Ok(self.set_session(&call, a).await),
                Err(e) => Err(e),
            },
            "get_session" => match parse::<GetArgs>(name, &args) {
                Ok(a) => Ok(self.get_session(&call, a).await),
                Err(e) => Err(e),
            },
            "new_session" => match parse::<NoArgs>(name, &args) {
                Ok(_) => Ok(self.new_session(&call).await),
                Err(e) => Err(e),
            },
            "execute" => match parse::<execute::ExecuteArgs>(name, &args) {
                Ok(a) => {
                    let answers = request.input_responses.as_ref();
                    let state = request.request_state.as_deref();
                    let log = self.log.for_call(ctx, call.mcp_session.is_some());
                    // Boxed, so that the small handlers above do not carry its state.
                    let run = execute::execute(&self.shared, &call, a, ctx, answers, state, &log);
                    Ok(Box::pin(run).await)
                }
                Err(e) => Err(self.invalid_arguments(&call, name, &args, e)),
            },
            other => {
                // rmcp logs the error it answers with: the caller's name is cut there too.
                let other = crate::telemetry::spans::bounded(other);
                return Err(McpError::invalid_params(
                    format!("Unknown tool: {other}"),
                    None,
                ));
            }
        };
        self.shared.metrics.mcp_call(name);
        Ok(result.unwrap_or_else(error_result))
    }

    /// A `search` or `execute` whose arguments do not parse is still audited (`invalid`).
    fn invalid_arguments(
        &self,
        call: &CallCtx,
        name: &str,
        args: &Map<String, Value>,
        error: String,
    ) -> String {
        let key = args.get("key").and_then(Value::as_str);
        crate::calls::execute::record_unparsed(&self.shared, call, name, key);
        error
    }

    async fn search(&self, call: &CallCtx, args: SearchArgs) -> CallToolResponse {
        use crate::calls::search::{self, Searched};
        match search::search(&self.shared, call, &args.query, args.min_score).await {
            Searched::Found(found) => text_result("search", search::text(&found)),
            Searched::Invalid(e) | Searched::Error(e) => {
                error_result(format!("Search failed: {e}"))
            }
        }
    }

    async fn set_session(&self, call: &CallCtx, args: SetArgs) -> CallToolResponse {
        if let Err(e) = mcc_catalog::context::check_writable(&args.name) {
            return text_result("set_session", e.to_string());
        }
        let scope = match self.shared.scope(call, args.session.as_deref()).await {
            Ok(s) => s,
            Err(failure) => return error_result(failure.message),
        };
        match self
            .shared
            .sessions
            .set(&scope, &args.name, args.value)
            .await
        {
            Ok(()) => text_result(
                "set_session",
                format!("Set {}.", mcc_catalog::pyfmt::repr_str(&args.name)),
            ),
            // Limits and the anonymous default bucket are refusals, not store failures.
            Err(e) => error_result(self.shared.store_failure("set", e)),
        }
    }

    async fn get_session(&self, call: &CallCtx, args: GetArgs) -> CallToolResponse {
        let scope = match self.shared.scope(call, args.session.as_deref()).await {
            Ok(s) => s,
            Err(failure) => return error_result(failure.message),
        };
        let stored = match self.shared.sessions.vars(&scope).await {
            Ok(v) => v,
            Err(e) => return error_result(self.shared.store_failure("vars", e)),
        };
        let context = mcc_catalog::context::assemble(call.caller.user.as_ref(), &stored);
        let value = context.get(&args.name).cloned().unwrap_or(Value::Null);
        text_result("get_session", mcc_catalog::pyfmt::json_dumps(&value))
    }

    async fn new_session(&self, call: &CallCtx) -> CallToolResponse {
        match self
            .shared
            .sessions
            .mint_handle(call.caller.username())
            .await
        {
            Ok(handle) => text_result("new_session", handle),
            Err(e) => error_result(self.shared.store_failure("mint", e)),
        }
    }
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            // Logging is deprecated (2026-07-28) but still what legacy clients ask for.
            #[allow(deprecated)]
            ServerCapabilities::builder()
                .enable_tools()
                .enable_prompts()
                .enable_resources()
                .enable_resources_list_changed()
                .enable_completions()
                .enable_logging()
                .build(),
        )
        .with_server_info(Implementation::new(SERVER_NAME, env!("CARGO_PKG_VERSION")))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(surface::tools().to_vec()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        surface::tool(name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let call = CallCtx::from_request(&context);
        // One info line per call: execute's pipeline writes its own, with the outcome.
        if request.name != "execute" {
            let tool = crate::telemetry::spans::bounded(&request.name);
            tracing::info!(user = call.caller.username(), tool, "tool call");
        }
        // rmcp runs this in a task of its own: its spans join the HTTP request's trace.
        let parts = context.extensions.get::<http::request::Parts>();
        // Boxed: the execute pipeline's state is large, and rmcp moves the handler's
        // future into a task (several copies per request) on every call.
        Box::pin(crate::telemetry::within(
            parts,
            self.dispatch(call, &request, &context),
        ))
        .await
    }

    async fn on_initialized(&self, context: rmcp::service::NotificationContext<RoleServer>) {
        let parts = context.extensions.get::<http::request::Parts>();
        // Legacy sessions only: a 2026-07-28 client has no stream to hear it on.
        let legacy = parts.is_some_and(|p| p.headers.contains_key("mcp-session-id"));
        if let (Some(watch), true) = (&self.list_changed, legacy) {
            let caller = parts.and_then(|p| p.extensions.get::<Identity>());
            watch.register(context.peer, caller.and_then(|c| c.user.clone()));
        }
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        Ok(ListPromptsResult::with_all_items(
            surface::prompts().to_vec(),
        ))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let args = request.arguments.unwrap_or_default();
        surface::render_prompt(&request.name, &args)
            .map(Into::into)
            .map_err(|e| McpError::invalid_params(e.to_string(), None))
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        let call = CallCtx::from_request(&context);
        let catalog = self.shared.catalog.snapshot();
        Ok(completion::complete(
            &catalog,
            call.caller.user.as_ref(),
            &request,
        ))
    }

    #[allow(deprecated)] // logging: see [`logging`]
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let call = CallCtx::from_request(&context);
        self.log.set(request.level, call.mcp_session.is_some());
        Ok(())
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let call = CallCtx::from_request(&context);
        let cursor = request.as_ref().and_then(|r| r.cursor.as_deref());
        let catalog = self.shared.catalog.snapshot();
        let policy = &self.shared.approvals.policy;
        resources::list(&catalog, policy, call.caller.user.as_ref(), cursor)
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        Ok(resources::templates())
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let call = CallCtx::from_request(&context);
        resources::read(&self.shared, &call, &request.uri)
            .await
            .map(Into::into)
    }
}
