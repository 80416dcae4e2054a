//! The resources in `examples/k8s/` pass admission (the CRDs' CEL rules, evaluated by
//! kube-cel) and the operator's own checks under the default settings of an operator in
//! `mcc-system`: every example Tool and UserGrant is Ready, and the fn tool introspects;
//! the pod-runtime examples are Ready once the pod runtime is on (and refused, saying so,
//! while it is off: the default).

use std::path::Path;
use std::sync::Arc;

use kube::CustomResourceExt;
use kube::core::cel::Validator;
use mcc_catalog::crd::{Runtime, Tool, UserGrant};
use mcc_catalog::introspect::{Introspector, Pending, find_python};
use mcc_operator::assemble::{Verdict, assemble};
use mcc_operator::settings::TenancyArgs;
use serde_json::Value;

fn example_docs() -> Vec<Value> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/k8s");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
        .iter()
        .flat_map(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            serde_saphyr::from_multiple::<Value>(&text)
                .unwrap_or_else(|e| panic!("{}: {e}", f.display()))
        })
        .collect()
}

fn schema<K: CustomResourceExt>() -> Value {
    let crd = K::crd();
    serde_json::to_value(
        crd.spec.versions[0]
            .schema
            .as_ref()
            .unwrap()
            .open_api_v3_schema
            .as_ref()
            .unwrap(),
    )
    .unwrap()
}

/// Evaluates a CRD's CEL rules on `doc`, as admission does.
fn admit(schema: &Value, doc: &Value) {
    if let Err(errors) = Validator::new().validate(schema, doc, None) {
        panic!("{}: {errors}", doc["metadata"]["name"]);
    }
}

#[test]
fn every_example_is_admitted_and_ready() {
    let docs = example_docs();
    let (mut tools, mut grants) = (vec![], vec![]);
    for doc in &docs {
        match doc["kind"].as_str() {
            Some("Tool") => {
                admit(&schema::<Tool>(), doc);
                tools.push(Arc::new(
                    serde_json::from_value::<Tool>(doc.clone()).unwrap(),
                ));
            }
            Some("UserGrant") => {
                admit(&schema::<UserGrant>(), doc);
                grants.push(Arc::new(
                    serde_json::from_value::<UserGrant>(doc.clone()).unwrap(),
                ));
            }
            _ => {}
        }
    }
    assert_eq!((tools.len(), grants.len()), (6, 2));
    let is_pod = |t: &Tool| matches!(t.spec.runtime, Some(Runtime::Pod(_)));
    let defaults = TenancyArgs::default()
        .parse()
        .unwrap()
        .resolve("mcc-system")
        .unwrap();
    let pods_on = TenancyArgs {
        pod_namespaces: Some("*".into()),
        ..TenancyArgs::default()
    }
    .parse()
    .unwrap()
    .resolve("mcc-system")
    .unwrap();

    // The pod examples: Ready with the pod runtime on, published as declared.
    let with_pods = assemble(&tools, &grants, &pods_on);
    for (id, v) in &with_pods.tools {
        assert!(matches!(v.verdict, Verdict::Ready { .. }), "{id}: {v:?}");
    }
    let pod_keys: Vec<&str> = with_pods
        .document
        .tools
        .iter()
        .filter(|t| !t.runtime.is_local())
        .map(|t| t.tool.key.as_str())
        .collect();
    assert_eq!(pod_keys, ["public.pod_hello", "reports.pod_title_case"]);
    assert!(
        with_pods
            .document
            .tools
            .iter()
            .all(|t| !t.introspect || t.runtime.is_local())
    );

    let assembly = assemble(&tools, &grants, &defaults);
    for (id, v) in &assembly.tools {
        let pod = tools.iter().any(|t| {
            id.ends_with(&format!("/{}", t.metadata.name.as_deref().unwrap_or(""))) && is_pod(t)
        });
        match pod {
            true => assert!(
                matches!(v.verdict, Verdict::PodRuntimeNotAllowed { off: true, .. }),
                "{id}: {v:?}"
            ),
            false => assert!(matches!(v.verdict, Verdict::Ready { .. }), "{id}: {v:?}"),
        }
    }
    for (id, v) in &assembly.grants {
        assert!(matches!(v, Verdict::Ready { .. }), "{id}: {v:?}");
    }
    let keys: Vec<&str> = assembly
        .document
        .tools
        .iter()
        .map(|t| t.tool.key.as_str())
        .collect();
    assert_eq!(
        keys,
        [
            "ops.api_status",
            "ops.whoami_echo",
            "public.greet",
            "reports.title_case"
        ]
    );
    assert!(
        assembly.document.tools.iter().all(|t| t.runtime.is_local()),
        "every example runs in the local runtime (the default)"
    );
    let doc = serde_json::to_string(&assembly.document).unwrap();
    assert!(!doc.contains("change-me"), "no secret value in the catalog");

    // The fn tool loads in a gateway: its callable exists and introspects.
    let title = &assembly.document.tools[3];
    assert!(title.introspect);
    let path = std::env::var("PATH").ok();
    if find_python("python3", path.as_deref()).is_none() {
        eprintln!("SKIP introspection: no python3 on PATH");
        return;
    }
    let mut fn_tools = vec![title.tool.clone()];
    let pending = [Pending {
        index: 0,
        name_from_callable: false,
    }];
    Introspector::default()
        .fill(&mut fn_tools, &pending)
        .unwrap_or_else(|e| panic!("{e}"));
    let params: Vec<&str> = fn_tools[0].params.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(params, ["s", "sep"]);
    assert_eq!(fn_tools[0].key, "reports.title_case");
}
