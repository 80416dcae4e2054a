//! The objects of a large cluster: `tools` Tools spread over `namespaces` namespaces, each
//! with a description of a few dozen words, three parameters with descriptions and a group
//! per namespace; one UserGrant per namespace's team in the trusted namespace. Words are
//! drawn from a fixed vocabulary with a fixed seed, so every run builds the same catalog.

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use mcc_catalog::crd::{Tool, ToolParam, ToolSpec, UserGrant, UserGrantSpec};
use mcc_operator::policy::Policy;

pub const TRUSTED: &str = "mcc-system";

const WORDS: &[&str] = &[
    "account",
    "alert",
    "archive",
    "audit",
    "backup",
    "balance",
    "batch",
    "billing",
    "bucket",
    "build",
    "cache",
    "certificate",
    "channel",
    "check",
    "cluster",
    "commit",
    "compress",
    "config",
    "container",
    "cost",
    "customer",
    "dashboard",
    "database",
    "deploy",
    "disk",
    "dns",
    "domain",
    "email",
    "endpoint",
    "event",
    "export",
    "feature",
    "file",
    "firewall",
    "flag",
    "forecast",
    "gateway",
    "graph",
    "health",
    "host",
    "image",
    "import",
    "incident",
    "index",
    "inventory",
    "invoice",
    "job",
    "key",
    "latency",
    "ledger",
    "license",
    "load",
    "lock",
    "log",
    "metric",
    "migration",
    "mirror",
    "monitor",
    "network",
    "node",
    "order",
    "package",
    "page",
    "partition",
    "payment",
    "pipeline",
    "policy",
    "pool",
    "price",
    "queue",
    "quota",
    "record",
    "region",
    "release",
    "replica",
    "report",
    "repository",
    "request",
    "restore",
    "role",
    "route",
    "rule",
    "scan",
    "schedule",
    "schema",
    "secret",
    "service",
    "session",
    "shipment",
    "snapshot",
    "stock",
    "storage",
    "stream",
    "subscription",
    "table",
    "tenant",
    "ticket",
    "token",
    "topic",
    "trace",
    "transfer",
    "user",
    "volume",
    "warehouse",
    "webhook",
    "zone",
];
const VERBS: &[&str] = &[
    "list",
    "get",
    "create",
    "update",
    "delete",
    "restart",
    "scale",
    "sync",
    "verify",
    "summarize",
    "search",
    "rotate",
    "approve",
    "cancel",
    "estimate",
    "compare",
];

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as usize
    }
    fn word(&mut self) -> &'static str {
        WORDS[self.next() % WORDS.len()]
    }
    fn sentence(&mut self, words: usize) -> String {
        (0..words)
            .map(|_| self.word())
            .collect::<Vec<_>>()
            .join(" ")
    }
}

fn created() -> Time {
    Time("2026-01-01T00:00:00Z".parse().unwrap())
}

/// The Tools (`tools` of them over `namespaces` namespaces) and UserGrants.
pub fn objects(tools: usize, namespaces: usize) -> (Vec<Arc<Tool>>, Vec<Arc<UserGrant>>) {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let per_namespace = tools.div_ceil(namespaces);
    let mut out = Vec::with_capacity(tools);
    for i in 0..tools {
        let ns = format!("team-{:03}", i / per_namespace);
        let verb = VERBS[rng.next() % VERBS.len()];
        let (a, b) = (rng.word(), rng.word());
        let name = format!("{verb}_{a}_{b}_{i}");
        let params = (0..3)
            .map(|p| ToolParam {
                name: format!("{}_{p}", rng.word()),
                ty: Some(["str", "int", "bool"][p].into()),
                required: Some(p == 0),
                description: Some(format!("The {} to {verb}.", rng.sentence(6))),
                ..Default::default()
            })
            .collect();
        let length = 20 + rng.next() % 20;
        let mut tool = Tool::new(
            &name.replace('_', "-"),
            ToolSpec {
                name: Some(name.clone()),
                description: Some(format!(
                    "{verb} the {a} {b} of a {}. {}.",
                    rng.word(),
                    rng.sentence(length)
                )),
                exec: Some(format!("echo {verb} {{{{ {a}_0 | quote }}}}")),
                groups: vec![ns.clone()],
                params: Some(params),
                ..Default::default()
            },
        );
        tool.metadata.namespace = Some(ns);
        tool.metadata.uid = Some(format!("uid-tool-{i}"));
        tool.metadata.generation = Some(1);
        tool.metadata.creation_timestamp = Some(created());
        out.push(Arc::new(tool));
    }
    let grants = (0..namespaces)
        .map(|n| {
            let mut g = UserGrant::new(
                &format!("team-{n:03}"),
                UserGrantSpec {
                    username: format!("user-{n:03}"),
                    groups: vec![format!("team-{n:03}")],
                    ..Default::default()
                },
            );
            g.metadata.namespace = Some(TRUSTED.into());
            g.metadata.uid = Some(format!("uid-grant-{n}"));
            g.metadata.generation = Some(1);
            g.metadata.creation_timestamp = Some(created());
            Arc::new(g)
        })
        .collect();
    (out, grants)
}

/// Single tenant, every team namespace may run local tools.
pub fn policy(namespaces: usize) -> Policy {
    let mut policy = Policy::single_tenant([TRUSTED]);
    for n in 0..namespaces {
        policy.local_runtime.insert(format!("team-{n:03}"));
    }
    policy
}

/// One Tool's description changed (a typical edit).
pub fn edited(tools: &[Arc<Tool>], which: usize) -> Vec<Arc<Tool>> {
    let mut out = tools.to_vec();
    let mut tool = (*out[which]).clone();
    tool.spec.description = Some("Edited: a new description of this tool.".into());
    tool.metadata.generation = Some(2);
    out[which] = Arc::new(tool);
    out
}
