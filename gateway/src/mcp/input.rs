//! The 2026-07-28 `input_required` round trip as this server speaks it: which clients are
//! asked that way, and the keys under which each of the gateway's own questions travels in
//! `inputRequests` and comes back in the retry's `inputResponses` (an upstream server's
//! question has its own, [`crate::upstream::relay::INPUT_KEY`]).

use rmcp::RoleServer;
use rmcp::model::ProtocolVersion;
use rmcp::service::RequestContext;

/// Missing required params of `execute` ([`super::ask`]).
pub const MISSING_PARAMS: &str = "missing_params";

/// Approval of an `execute` call ([`super::approval`]).
pub const APPROVAL: &str = "approval";

/// Whether the client speaks 2026-07-28: it is asked with `input_required` and answers in
/// a retry of the call, not within it.
pub fn stateless(ctx: &RequestContext<RoleServer>) -> bool {
    ctx.protocol_version()
        .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28)
}
