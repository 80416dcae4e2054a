//! MCPServers in the assembly: refusals before any connection (namespace, URL, groups),
//! the shared conversion rule, Tools first for keys and budget, the last good tools
//! of an unreachable upstream kept but marked unavailable, and `sessionContext`.

use std::collections::BTreeMap;
use std::time::Instant;

use mcc_catalog::annotations::Annotations;
use mcc_catalog::context::SessionAccess;
use mcc_catalog::crd::{MCPServer, MCPServerSpec};
use mcc_catalog::upstream::Discovered;
use serde_json::json;

use super::*;
use crate::fixtures::{Builder, TestTool, test_policy};
use crate::policy::{Groups, PodScope, UpstreamRefusal};
use crate::status::ready_reason;
use crate::upstream::Discovery;

const URL: &str = "http://mcp.internal:3001/mcp";

fn server(name: &str, ns: &str, at: &str, spec: serde_json::Value) -> Arc<MCPServer> {
    let mut spec = spec;
    spec["url"] = spec.get("url").cloned().unwrap_or(json!(URL));
    let mut s = MCPServer::new(name, serde_json::from_value::<MCPServerSpec>(spec).unwrap());
    s.metadata.namespace = Some(ns.into());
    s.metadata.generation = Some(1);
    s.metadata.creation_timestamp = Some(crate::fixtures::time(at));
    Arc::new(s)
}

fn listed(names: &[&str]) -> Vec<Discovered> {
    names
        .iter()
        .map(|n| Discovered {
            name: n.to_string(),
            description: Some(format!("{n} things")),
            input_schema: json!({"type": "object", "properties": {"x": {"type": "string"}}}),
            output_schema: None,
            annotations: Annotations::default(),
        })
        .collect()
}

fn found(names: &[&str], available: bool) -> Discovery {
    Discovery {
        url: URL.into(),
        generation: Some(1),
        listed: listed(names),
        available,
        last_error: (!available).then(|| "the connection failed".into()),
        last_refresh: Some("2026-12-07T00:00:00Z".into()),
        refreshed_by: None,
        listed_ok: true,
        attempted: Instant::now(),
        failures: u32::from(!available),
    }
}

/// The test policy with upstreams allowed in `team-a` at `mcp.internal`, and groups
/// per namespace: `team-a` may publish under `team-a` only.
fn policy() -> Policy {
    let mut p = test_policy();
    p.upstream_namespaces = PodScope::Only(["team-a".into()].into());
    p.upstream_urls = vec!["mcp.internal".into()];
    p.groups = Some(BTreeMap::from([
        ("team-a".into(), Groups::Only(["team-a".into()].into())),
        ("ns".into(), Groups::Any),
    ]));
    p
}

fn run(
    tools: &[Arc<Tool>],
    servers: &[Arc<MCPServer>],
    found: &[(&str, Discovery)],
    policy: &Policy,
) -> Assembly {
    let discoveries: BTreeMap<String, Discovery> = found
        .iter()
        .map(|(id, d)| (id.to_string(), d.clone()))
        .collect();
    assemble_all(
        tools,
        &[],
        Servers {
            resources: servers,
            discoveries: &discoveries,
        },
        policy,
    )
}

fn keys(a: &Assembly) -> Vec<String> {
    a.document
        .tools
        .iter()
        .map(|t| t.tool.key.clone())
        .collect()
}

#[test]
fn a_discovered_server_publishes_its_tools_and_where_calls_go() {
    let s = server(
        "ev",
        "team-a",
        "2026-01-01T00:00:00Z",
        json!({
            "groups": ["team-a"], "prefix": "ev_", "exclude": ["add*"],
            "headers": [{"name": "Authorization", "secretKeyRef": {"name": "tok", "key": "t"}}],
            "timeout": 5.0
        }),
    );
    let a = run(
        &[],
        &[s],
        &[("team-a/ev", found(&["echo", "add", "get.sum"], true))],
        &policy(),
    );
    assert_eq!(keys(&a), ["team-a.ev_echo", "team-a.ev_get_sum"]);
    let v = &a.servers["team-a/ev"];
    assert_eq!((v.tools, v.filtered, v.refused.len()), (2, 1, 0));
    assert!(matches!(v.verdict, Verdict::Ready { .. }));
    let t = &a.document.tools[0];
    assert_eq!(
        (t.namespace.as_str(), t.resource.as_str()),
        ("team-a", "ev")
    );
    match &t.tool.kind {
        mcc_catalog::ToolKind::Mcp { server, tool, .. } => {
            assert_eq!((server.as_str(), tool.as_str()), ("team-a/ev", "echo"));
        }
        other => panic!("expected an mcp tool, got {other:?}"),
    }
    assert_eq!(t.tool.limits.timeout, Some(5.0));
    let up = &a.document.upstreams;
    assert_eq!(up.len(), 1);
    assert_eq!(
        (up[0].server.as_str(), up[0].url.as_str()),
        ("team-a/ev", URL)
    );
    assert!(up[0].available);
    assert_eq!(up[0].headers[0].secret, "tok");
    // The document names the Secret, never a value.
    let text = serde_json::to_string(&a.document).unwrap();
    assert!(text.contains("\"secret\":\"tok\""), "{text}");
}

#[test]
fn refused_servers_are_never_published_and_say_why() {
    let p = policy();
    let elsewhere = server(
        "ev",
        "team-b",
        "2026-01-01T00:00:00Z",
        json!({"groups": ["team-b"]}),
    );
    let bad_url = server(
        "far",
        "team-a",
        "2026-01-01T00:00:00Z",
        json!({
            "url": "https://evil.example/mcp", "groups": ["team-a"]
        }),
    );
    let admin = server(
        "adm",
        "team-a",
        "2026-01-01T00:00:00Z",
        json!({"groups": ["admin"]}),
    );
    let open = server("open", "team-a", "2026-01-01T00:00:00Z", json!({}));
    let all = [elsewhere, bad_url, admin, open];
    let found: Vec<(&str, Discovery)> = ["team-b/ev", "team-a/far", "team-a/adm", "team-a/open"]
        .iter()
        .map(|id| (*id, found(&["echo"], true)))
        .collect();
    let a = run(&[], &all, &found, &p);
    assert!(a.document.tools.is_empty() && a.document.upstreams.is_empty());
    assert_eq!(
        a.servers["team-b/ev"].verdict,
        Verdict::UpstreamNotAllowed {
            namespace: "team-b".into(),
            refusal: UpstreamRefusal::Namespace
        }
    );
    assert_eq!(
        a.servers["team-a/far"].verdict,
        Verdict::UpstreamNotAllowed {
            namespace: "team-a".into(),
            refusal: UpstreamRefusal::Url
        }
    );
    assert_eq!(
        a.servers["team-a/adm"].verdict,
        Verdict::GroupNotAllowed {
            namespace: "team-a".into(),
            group: Some("admin".into())
        }
    );
    // No groups is open to everyone, like `public`, which team-a may not use.
    assert_eq!(
        a.servers["team-a/open"].verdict,
        Verdict::GroupNotAllowed {
            namespace: "team-a".into(),
            group: None
        }
    );
    let (ready, reason, message) = ready_reason(&a.servers["team-a/far"].verdict);
    assert!(!ready);
    assert_eq!(reason, "UpstreamNotAllowed");
    assert!(message.contains("egress allow-list"), "{message}");
    assert!(
        !message.contains("evil"),
        "the status does not echo the URL: {message}"
    );
}

#[test]
fn tools_keep_their_keys_and_older_servers_win() {
    let mut p = policy();
    p.groups = None;
    let local = Arc::new(TestTool::exec("echo", "ns", "echo").created("2026-01-01T00:00:00Z"));
    let first = server("a", "team-a", "2026-02-01T00:00:00Z", json!({}));
    let second = server("b", "team-a", "2026-03-01T00:00:00Z", json!({}));
    let a = run(
        &[local],
        &[second, first],
        &[
            ("team-a/a", found(&["echo", "add"], true)),
            ("team-a/b", found(&["add", "sub"], true)),
        ],
        &p,
    );
    let by_source: Vec<(String, String)> = a
        .document
        .tools
        .iter()
        .map(|t| (t.tool.key.clone(), t.resource.clone()))
        .collect();
    assert_eq!(
        by_source,
        [
            ("add".into(), "a".into()),
            ("echo".into(), "echo".into()),
            ("sub".into(), "b".into())
        ]
    );
    assert_eq!(
        a.tools["ns/echo"].verdict,
        Verdict::Ready {
            introspect: false,
            renamed: false
        }
    );
    let refused = &a.servers["team-a/a"].refused;
    assert_eq!(refused.len(), 1);
    assert_eq!(
        refused[0].reason,
        "its key 'echo' is already served by Tool ns/echo"
    );
    assert_eq!(
        a.servers["team-a/b"].refused[0].reason,
        "its key 'add' is already served by MCPServer team-a/a"
    );
}

#[test]
fn upstream_tools_count_against_the_namespace_budget() {
    let mut p = policy();
    p.groups = None;
    let s = server("ev", "team-a", "2026-02-01T00:00:00Z", json!({}));
    let d = [("team-a/ev", found(&["echo", "add"], true))];
    let fits = run(&[], std::slice::from_ref(&s), &d, &p);
    let bytes: u64 = fits
        .document
        .tools
        .iter()
        .map(|t| serde_json::to_vec(t).unwrap().len() as u64)
        .sum();
    // A Tool of the namespace takes part of the budget first; the server's tools no longer fit.
    let mut local = TestTool::exec("big", "team-a", "big").created("2026-01-01T00:00:00Z");
    local.spec.description = Some("d".repeat(200));
    p.local_runtime.insert("team-a".into());
    p.tool_bytes = BTreeMap::from([("team-a".into(), bytes + 100)]);
    let a = run(&[Arc::new(local)], &[s], &d, &p);
    assert_eq!(keys(&a), ["big"]);
    match &a.servers["team-a/ev"].verdict {
        Verdict::NamespaceBudgetExceeded { size, budget, .. } => {
            assert_eq!((*size, *budget), (bytes, bytes + 100));
        }
        other => panic!("expected NamespaceBudgetExceeded, got {other:?}"),
    }
    assert!(a.document.upstreams.is_empty());
}

#[test]
fn an_unreachable_upstream_keeps_its_last_good_tools_marked_unavailable() {
    let mut p = policy();
    p.groups = None;
    let s = server("ev", "team-a", "2026-02-01T00:00:00Z", json!({}));
    let a = run(
        &[],
        std::slice::from_ref(&s),
        &[("team-a/ev", found(&["echo"], false))],
        &p,
    );
    assert_eq!(keys(&a), ["echo"]);
    assert!(!a.document.upstreams[0].available);
    assert_eq!(
        a.document.upstreams[0].reason.as_deref(),
        Some("the connection failed")
    );
    // Never discovered at this URL: nothing published, and the status says why.
    let mut moved = found(&["echo"], true);
    moved.url = "http://mcp.internal/other".into();
    let a = run(&[], std::slice::from_ref(&s), &[("team-a/ev", moved)], &p);
    assert!(a.document.tools.is_empty());
    assert_eq!(
        a.servers["team-a/ev"].verdict,
        Verdict::NotDiscovered { error: None }
    );
    let a = run(&[], &[s], &[], &p);
    assert_eq!(
        ready_reason(&a.servers["team-a/ev"].verdict).1,
        "Discovering"
    );
}

#[test]
fn upstream_tools_of_an_approval_namespace_need_approval() {
    let s = || {
        server(
            "ev",
            "team-a",
            "2026-01-01T00:00:00Z",
            json!({"groups": ["team-a"]}),
        )
    };
    let found = [("team-a/ev", found(&["echo"], true))];
    let mut policy = policy();
    let a = run(&[], &[s()], &found, &policy);
    assert!(!a.document.tools[0].tool.approval_required);
    policy.approval_namespaces.insert("team-a".into());
    let a = run(&[], &[s()], &found, &policy);
    assert_eq!(keys(&a), ["team-a.echo"]);
    assert!(a.document.tools[0].tool.approval_required);
}

#[test]
fn a_token_audience_must_be_approved_and_is_published_by_name_only() {
    let spec = |aud: &str| {
        json!({"url": "https://mcp.internal/mcp", "groups": ["team-a"],
               "serviceAccountToken": {"audience": aud}})
    };
    let asked = server("ev", "team-a", "2026-01-01T00:00:00Z", spec("mcp.internal"));
    let mut listing = found(&["echo"], true);
    listing.url = "https://mcp.internal/mcp".into();
    let discovered = [("team-a/ev", listing)];
    let a = run(&[], std::slice::from_ref(&asked), &discovered, &policy());
    assert_eq!(
        a.servers["team-a/ev"].verdict,
        Verdict::UpstreamNotAllowed {
            namespace: "team-a".into(),
            refusal: UpstreamRefusal::TokenAudience("mcp.internal".into())
        }
    );
    assert!(a.document.upstreams.is_empty());
    let mut approved = policy();
    approved.upstream_token_audiences = vec!["mcp.internal".into()];
    let a = run(&[], &[asked], &discovered, &approved);
    assert!(matches!(
        a.servers["team-a/ev"].verdict,
        Verdict::Ready { .. }
    ));
    assert_eq!(
        a.document.upstreams[0].token_audience.as_deref(),
        Some("mcp.internal")
    );
    // With an Authorization header too: one of the two.
    let both = server(
        "both",
        "team-a",
        "2026-01-01T00:00:00Z",
        json!({"url": "https://mcp.internal/mcp", "groups": ["team-a"],
               "serviceAccountToken": {"audience": "mcp.internal"},
               "headers": [{"name": "authorization", "secretKeyRef": {"name": "t", "key": "t"}}]}),
    );
    let a = run(&[], &[both], &[], &approved);
    assert!(
        matches!(&a.servers["team-a/both"].verdict, Verdict::Invalid(e) if e.field == "serviceAccountToken"),
        "{:?}",
        a.servers["team-a/both"].verdict
    );
}

/// `sessionContext`: published with the upstream so every gateway applies it, the
/// variables it names (and no other) visible to its tools' calls, identity only where
/// the platform team allows it, bad names refused by the file mode's rule.
#[test]
fn session_context_is_published_and_identity_needs_the_platform_team() {
    let declared = |name: &str, identity: bool, variables: serde_json::Value| {
        server(
            name,
            "team-a",
            "2026-01-01T00:00:00Z",
            json!({"groups": ["team-a"], "prefix": format!("{name}_"),
                   "sessionContext": {"identity": identity, "variables": variables}}),
        )
    };
    let vars = declared("vars", false, json!(["project", "region"]));
    let who = declared("who", true, json!([]));
    let plain = server(
        "plain",
        "team-a",
        "2026-01-01T00:00:00Z",
        json!({"groups": ["team-a"], "prefix": "plain_"}),
    );
    let all = [vars, who, plain];
    let discovered: Vec<(&str, Discovery)> = ["team-a/vars", "team-a/who", "team-a/plain"]
        .iter()
        .map(|id| (*id, found(&["echo"], true)))
        .collect();

    let a = run(&[], &all, &discovered, &policy());
    let access = |key: &str| {
        let t = a.document.tools.iter().find(|t| t.tool.key == key);
        t.unwrap_or_else(|| panic!("{key} is not served"))
            .session
            .clone()
    };
    assert_eq!(
        access("team-a.vars_echo"),
        SessionAccess::Keys(vec!["project".into(), "region".into()])
    );
    assert_eq!(access("team-a.plain_echo"), SessionAccess::Keys(vec![]));
    let published = |server: &str| {
        let u = a.document.upstreams.iter().find(|u| u.server == server);
        u.unwrap_or_else(|| panic!("{server} is not published"))
            .session_context
            .clone()
    };
    assert_eq!(
        published("team-a/vars").variables,
        ["project".to_string(), "region".into()]
    );
    assert!(!published("team-a/vars").identity);
    assert!(published("team-a/plain").is_off());
    // Off is left out of the document; declared, it is there for every replica.
    let text = serde_json::to_string(&a.document.upstreams).unwrap();
    assert_eq!(text.matches("sessionContext").count(), 1, "{text}");

    // team-a is neither trusted nor allowed identity: refused, and never connected to.
    let v = &a.servers["team-a/who"].verdict;
    assert_eq!(
        *v,
        Verdict::IdentityNotAllowed {
            namespace: "team-a".into()
        }
    );
    let (ready, reason, message) = ready_reason(v);
    assert_eq!((ready, reason), (false, "IdentityNotAllowed"));
    assert!(
        message.contains("MCC_UPSTREAM_IDENTITY_NAMESPACES")
            && message.contains("upstreams.identityNamespaces"),
        "{message}"
    );
    assert!(!a.document.tools.iter().any(|t| t.resource == "who"));

    // Allowed by the platform team: published with identity.
    let mut allowed = policy();
    allowed.upstream_identity.insert("team-a".into());
    let a = run(&[], &all, &discovered, &allowed);
    assert!(matches!(
        a.servers["team-a/who"].verdict,
        Verdict::Ready { .. }
    ));
    let who = a
        .document
        .upstreams
        .iter()
        .find(|u| u.server == "team-a/who");
    assert!(who.unwrap().session_context.identity);
    // The trusted namespaces may, without being listed.
    assert!(policy().may_send_identity("ns") && !policy().may_send_identity("team-a"));

    // Names the file mode refuses are refused here too, named as the MCPServer's field.
    for (variables, expected) in [
        (json!(["user"]), "identity: true"),
        (json!(["Project"]), "not a session variable name"),
        (json!(["a", "a"]), "listed twice"),
    ] {
        let bad = declared("bad", false, variables);
        let a = run(&[], &[bad], &[], &policy());
        match &a.servers["team-a/bad"].verdict {
            Verdict::Invalid(e) => {
                assert!(e.field.starts_with("sessionContext.variables["), "{e:?}");
                assert!(e.message.contains(expected), "{e:?}");
            }
            other => panic!("expected InvalidSpec, got {other:?}"),
        }
    }
}
