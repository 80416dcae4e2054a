//! Asking the client for missing required parameters of `execute`.
//!
//! Only required `str`/`int`/`float`/`bool` parameters are asked for, with the message
//! `Tool '<key>' requires: a (str), b (int)`:
//! - legacy clients that declared elicitation get an `elicitation/create` request;
//! - 2026-07-28 clients that declare elicitation get the multi-round-trip flow: an
//!   `input_required` result, then the retried call carries the answer;
//! - other clients get no question and the call goes on to the validation error.
//!
//! Declined or cancelled → the caller returns `Execution cancelled: …`.
//!
//! [`McpAsk`] also asks for approval, after validation ([`super::approval`]), and puts
//! an upstream MCP server's question to a 2026-07-28 client as `input_required` under
//! [`crate::upstream::relay::INPUT_KEY`], reading the retry's answer
//! ([`crate::calls::held`]).

use std::time::Duration;

use mcc_catalog::{Param, Tool};
use rmcp::RoleServer;
use rmcp::model::{
    ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema,
    InputRequest, InputRequests, InputRequiredResult, InputResponses,
};
use rmcp::service::{ElicitationMode, RequestContext};
use serde_json::{Map, Value, json};

use super::input::{APPROVAL, MISSING_PARAMS, stateless};
use crate::calls::executed::HeldAnswer;
use crate::upstream::relay::INPUT_KEY as UPSTREAM_KEY;

/// How long a legacy client may take to answer.
const ELICITATION_TIMEOUT: Duration = Duration::from_secs(300);

/// What to do after checking for missing parameters; pending: the `input_required`
/// result to reply with (the client retries with an answer).
pub type Asked = crate::calls::executed::Asked<InputRequiredResult>;

/// The pipeline's [`crate::calls::executed::Ask`] for one MCP request: asks the client
/// as described above.
pub struct McpAsk<'a> {
    pub ctx: &'a RequestContext<RoleServer>,
    pub answers: Option<&'a InputResponses>,
    /// The `requestState` a 2026-07-28 retry echoes (an approval ticket).
    pub state: Option<&'a str>,
    pub tickets: &'a crate::calls::approval::Tickets,
}

#[async_trait::async_trait]
impl crate::calls::executed::Ask for McpAsk<'_> {
    type Pending = InputRequiredResult;

    async fn missing_params(&self, tool: &Tool, key: &str, params: Map<String, Value>) -> Asked {
        // A 2026-07-28 answer to the approval question (or to an upstream's) repeats the
        // original arguments only: the params answered in the round that asked come
        // from its ticket.
        if let (Some(ticket), Some(answers)) = (self.state, self.answers)
            && (answers.contains_key(APPROVAL) || answers.contains_key(UPSTREAM_KEY))
            && !answers.contains_key(MISSING_PARAMS)
            && let Some(answered) = self.tickets.answered(ticket).await
        {
            // Only what the retry lacks: a value it carries itself is its own (and is
            // checked against the ticket's hash like any other).
            let mut params = params;
            for (name, value) in answered {
                params.entry(name).or_insert(value);
            }
            return missing_params(tool, key, params, self.ctx, None).await;
        }
        missing_params(tool, key, params, self.ctx, self.answers).await
    }

    async fn approve(
        &self,
        request: &crate::calls::approval::ApprovalRequest<'_>,
    ) -> crate::calls::executed::Approval<InputRequiredResult> {
        super::approval::approve(request, self.ctx, self.answers, self.state).await
    }

    fn upstream_answer(&self) -> Option<HeldAnswer> {
        if !stateless(self.ctx) {
            return None;
        }
        let answer = self.answers?.get(UPSTREAM_KEY)?;
        // An answer that cannot be read is no answer the upstream should act on.
        let answer = serde_json::from_value::<ElicitResult>(answer.clone())
            .unwrap_or_else(|_| ElicitResult::new(ElicitationAction::Cancel));
        Some(HeldAnswer {
            ticket: self.state.unwrap_or_default().to_string(),
            answer,
        })
    }

    fn upstream_question(
        &self,
        question: ElicitRequestParams,
        ticket: &crate::calls::approval::Issued,
    ) -> Option<InputRequiredResult> {
        let mut requests = InputRequests::new();
        requests.insert(
            UPSTREAM_KEY.to_string(),
            InputRequest::Elicitation(ElicitRequest::new(question)),
        );
        Some(InputRequiredResult::new(
            Some(requests),
            Some(ticket.id.clone()),
        ))
    }
}

/// The message shown to the user, as the reference words it.
pub fn message(key: &str, missing: &[&Param]) -> String {
    let list: Vec<String> = missing
        .iter()
        .map(|p| format!("{} ({})", p.name, p.ty))
        .collect();
    format!("Tool '{key}' requires: {}", list.join(", "))
}

fn schema(missing: &[&Param]) -> Option<ElicitationSchema> {
    let properties: Map<String, Value> = missing
        .iter()
        .map(|p| {
            let mut prop = json!({"type": p.ty.json_schema_type()});
            if !p.description.is_empty() {
                prop["description"] = Value::from(p.description.clone());
            }
            (p.name.clone(), prop)
        })
        .collect();
    let names: Vec<&str> = missing.iter().map(|p| p.name.as_str()).collect();
    let raw = json!({"type": "object", "properties": properties, "required": names});
    ElicitationSchema::from_json_schema(raw.as_object().cloned()?).ok()
}

/// Checks `params` for missing required scalars and, when the client can answer, asks.
pub async fn missing_params(
    tool: &Tool,
    key: &str,
    params: Map<String, Value>,
    ctx: &RequestContext<RoleServer>,
    answers: Option<&InputResponses>,
) -> Asked {
    let missing: Vec<&Param> = mcc_catalog::params::missing_required(tool, &params)
        .into_iter()
        .filter(|p| p.ty.is_scalar())
        .collect();
    if missing.is_empty() {
        return Asked::Proceed(params);
    }
    let Some(requested_schema) = schema(&missing) else {
        return Asked::Proceed(params);
    };
    let question = ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: message(key, &missing),
        requested_schema,
    };
    if stateless(ctx) {
        if let Some(answer) = answers.and_then(|a| a.get(MISSING_PARAMS)) {
            return match serde_json::from_value::<ElicitResult>(answer.clone()) {
                Ok(result) => apply(result, params),
                Err(e) => {
                    tracing::warn!(tool = key, error = %e, "unreadable input response");
                    Asked::Proceed(params)
                }
            };
        }
        let declared = ctx
            .client_capabilities()
            .is_some_and(|c| c.elicitation.is_some());
        if !declared {
            return Asked::Proceed(params);
        }
        let mut requests = InputRequests::new();
        requests.insert(
            MISSING_PARAMS.to_string(),
            InputRequest::Elicitation(ElicitRequest::new(question)),
        );
        return Asked::Pending(InputRequiredResult::from_input_requests(requests));
    }
    if !ctx
        .peer
        .supported_elicitation_modes()
        .contains(&ElicitationMode::Form)
    {
        return Asked::Proceed(params);
    }
    match ctx
        .peer
        .create_elicitation_with_timeout(question, Some(ELICITATION_TIMEOUT))
        .await
    {
        Ok(result) => apply(result, params),
        Err(e) => {
            // As the reference: a failed question is not fatal; validation speaks next.
            tracing::warn!(tool = key, error = %e, "elicitation failed");
            Asked::Proceed(params)
        }
    }
}

fn apply(result: ElicitResult, mut params: Map<String, Value>) -> Asked {
    match result.action {
        ElicitationAction::Accept => {
            if let Some(Value::Object(answer)) = result.content {
                params.extend(answer);
            }
            Asked::Proceed(params)
        }
        _ => Asked::Cancelled,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcc_catalog::ParamType;

    #[test]
    fn message_lists_names_and_types() {
        let a = Param {
            name: "a".into(),
            ty: ParamType::Str,
            required: true,
            ..Param::default()
        };
        let b = Param {
            name: "b".into(),
            ty: ParamType::Int,
            required: true,
            ..Param::default()
        };
        assert_eq!(
            message("public.greet", &[&a, &b]),
            "Tool 'public.greet' requires: a (str), b (int)"
        );
        let s = serde_json::to_value(schema(&[&a, &b]).unwrap()).unwrap();
        assert_eq!(s["properties"]["b"]["type"], "integer");
        assert_eq!(s["required"], json!(["a", "b"]));
    }
}
