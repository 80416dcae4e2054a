//! Keyword-only behaviour of [`SearchIndex`]: output format, RBAC, min_score, typo
//! tolerance. (Embedding tests need model files: see tests/embeddings.rs.)

use super::*;
use mcc_catalog::{Param, ParamType, ToolKind};

pub(super) fn tool(groups: &[&str], name: &str, description: &str) -> Tool {
    let groups: Vec<String> = groups.iter().map(|g| g.to_string()).collect();
    Tool {
        key: mcc_catalog::key::tool_key(&groups, name),
        name: name.into(),
        groups,
        description: description.into(),
        example: String::new(),
        kind: ToolKind::Exec {
            command: "true".into(),
        },
        params: vec![],
        stdin: false,
        limits: Default::default(),
        cwd: None,
        env: Default::default(),
        env_file: None,
        env_passthrough: Default::default(),
        transform: None,
        cache_ttl: None,
        rate_limit: None,
        return_type: None,
        annotations: Default::default(),
        output_schema: None,
        approval_required: false,
        source: String::new(),
    }
}

pub(super) fn catalog() -> Vec<Tool> {
    let mut shell = tool(
        &["admin"],
        "shell",
        "Run a shell command on the gateway host.",
    );
    shell.params.push(Param {
        name: "command".into(),
        ty: ParamType::Str,
        required: true,
        description: "The command line to run.".into(),
        ..Param::default()
    });
    vec![
        shell,
        tool(
            &["public"],
            "request",
            "Make an HTTP request to a URL and return the body.",
        ),
        tool(
            &["ops"],
            "restart_deployment",
            "Restart a Kubernetes deployment.",
        ),
        tool(
            &["public"],
            "weather_forecast",
            "Weather forecast for a city.",
        ),
    ]
}

fn user(groups: &[&str]) -> User {
    User {
        username: "u".into(),
        groups: groups.iter().map(|g| g.to_string()).collect(),
        ..User::default()
    }
}

fn keys(index: &SearchIndex, hits: &[Hit]) -> Vec<String> {
    hits.iter()
        .map(|h| index.tools()[h.index].key.clone())
        .collect()
}

fn search(index: &SearchIndex, q: &str, u: Option<&User>, min: Option<f32>) -> Vec<Hit> {
    index
        .search(q, None, Mode::Hybrid, index.allowed_for(u), min, 10)
        .unwrap()
}

#[test]
fn finds_by_name_words_split_from_snake_case() {
    let index = SearchIndex::build(&catalog(), None, Fusion::default()).unwrap();
    let admin = user(&["admin"]);
    let hits = search(&index, "restart deployment", Some(&admin), None);
    assert_eq!(keys(&index, &hits)[0], "ops.restart_deployment");
    let hits = search(&index, "run a shell command", Some(&admin), None);
    assert_eq!(keys(&index, &hits)[0], "admin.shell");
}

#[test]
fn tolerates_typos_like_fuzziness_auto() {
    let index = SearchIndex::build(&catalog(), None, Fusion::default()).unwrap();
    // "wether" → weather (1 edit, 6 letters: up to 2), "forcast" → forecast.
    let hits = search(&index, "wether forcast", None, None);
    assert_eq!(keys(&index, &hits), ["public.weather_forecast"]);
    // An exact match outranks the same word misspelt.
    let exact = search(&index, "weather", None, None)[0].score;
    let typo = search(&index, "wether", None, None)[0].score;
    assert!(exact > typo, "{exact} vs {typo}");
}

#[test]
fn only_tools_the_caller_may_execute_are_returned() {
    let index = SearchIndex::build(&catalog(), None, Fusion::default()).unwrap();
    let anon = search(
        &index,
        "shell command restart deployment request",
        None,
        None,
    );
    assert_eq!(keys(&index, &anon), ["public.request"]);
    let ops = search(
        &index,
        "shell command restart deployment",
        Some(&user(&["ops"])),
        None,
    );
    assert_eq!(keys(&index, &ops), ["ops.restart_deployment"]);
}

#[test]
fn min_score_filters_and_empty_results_say_so() {
    let index = SearchIndex::build(&catalog(), None, Fusion::default()).unwrap();
    let all = search(&index, "weather request", None, None);
    assert_eq!(all.len(), 2);
    let top = all[0].score;
    let filtered = search(&index, "weather request", None, Some(top));
    assert_eq!(filtered.len(), 1);
    let none = search(&index, "weather", None, Some(1e6));
    assert_eq!(render_results(&index, &none), NO_MATCH);
    assert!(search(&index, "zzzqqq", None, None).is_empty());
    assert!(search(&index, "", None, None).is_empty());
}

#[test]
fn renders_mcc_format() {
    let index = SearchIndex::build(&catalog(), None, Fusion::default()).unwrap();
    let hits = vec![
        Hit {
            score: 8.4249,
            index: 1,
        },
        Hit {
            score: 1.0,
            index: 3,
        },
    ];
    assert_eq!(
        render_results(&index, &hits),
        "[8.42]\n## public.request () -> str | (int, str, str)\n\
         Make an HTTP request to a URL and return the body.\n\
         \n\n[1.00]\n## public.weather_forecast () -> str | (int, str, str)\n\
         Weather forecast for a city.\n"
    );
}

#[test]
fn scores_format_like_python() {
    // Python: f"{0.125:.2f}" == '0.12', f"{0.375:.2f}" == '0.38', f"{2.675:.2f}" == '2.67'.
    assert_eq!(format_score(0.125), "0.12");
    assert_eq!(format_score(0.375), "0.38");
    assert_eq!(format_score(12.5), "12.50");
    // 2.675f32 is 2.6749999523…, so it rounds down as in Python.
    assert_eq!(format_score(2.675), "2.67");
}

#[tokio::test]
async fn rebuild_swaps_the_index_atomically() {
    let service = SearchService::new(SearchSettings::default()).unwrap();
    assert!(service.current().is_empty());
    let before = service.current();
    service.rebuild(catalog()).await.unwrap();
    assert!(before.is_empty(), "a pinned index never changes");
    assert_eq!(service.current().len(), 4);
    let text = service
        .search_text(None, "weather", None, None)
        .await
        .unwrap();
    assert!(
        text.starts_with('[') && text.contains("## public.weather_forecast"),
        "{text}"
    );
    let text = service
        .search_text(None, "shell", None, None)
        .await
        .unwrap();
    assert_eq!(text, NO_MATCH);
}

#[test]
fn an_older_rebuild_never_replaces_a_newer_one() {
    let service = SearchService::new(SearchSettings::default()).unwrap();
    let old = service.next_generation_for_tests();
    service.rebuild_blocking(&catalog()[..1]).unwrap();
    assert_eq!(service.current().len(), 1);
    // The request numbered before the one just applied arrives late: it is dropped.
    service
        .rebuild_generation_for_tests(&catalog(), old)
        .unwrap();
    assert_eq!(service.current().len(), 1);
}

#[test]
fn only_the_first_distinct_words_of_a_query_are_ranked() {
    use super::keyword::MAX_QUERY_WORDS;
    let index = SearchIndex::build(&catalog(), None, Fusion::default()).unwrap();
    let filler: Vec<String> = (0..MAX_QUERY_WORDS).map(|i| format!("zq{i}x")).collect();
    let filler = filler.join(" ");
    let first = search(&index, &format!("weather {filler}"), None, None);
    assert_eq!(keys(&index, &first), ["public.weather_forecast"]);
    // Repeating a word does not use up the allowance.
    let repeated = format!("{} weather", "zzz ".repeat(MAX_QUERY_WORDS * 2));
    assert_eq!(
        keys(&index, &search(&index, &repeated, None, None)),
        ["public.weather_forecast"]
    );
    assert!(search(&index, &format!("{filler} weather"), None, None).is_empty());
}

#[tokio::test]
async fn a_query_over_max_query_bytes_is_refused_naming_the_setting() {
    let service = SearchService::new(SearchSettings {
        max_query_bytes: 16,
        ..SearchSettings::default()
    })
    .unwrap();
    service.rebuild(catalog()).await.unwrap();
    let err = service
        .search_text(None, &"w".repeat(17), None, None)
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "the query is 17 bytes; the limit is 16 bytes (setting search.max_query_bytes)"
    );
    let ok = service
        .search_text(None, "weather forecast", None, None)
        .await;
    assert!(ok.unwrap().contains("public.weather_forecast"));
}

#[test]
fn dot_in_lanes_equals_the_plain_sum_for_every_length() {
    // Lengths around the lane width (the remainder path) and the model's 384.
    for len in [0, 1, 15, 16, 17, 33, 384, 385] {
        let a: Vec<f32> = (0..len)
            .map(|i| ((i * 7 % 13) as f32 - 6.0) / 5.0)
            .collect();
        let b: Vec<f32> = (0..len)
            .map(|i| ((i * 5 % 11) as f32 - 5.0) / 3.0)
            .collect();
        let plain: f64 = a.iter().zip(&b).map(|(x, y)| f64::from(x * y)).sum();
        let lanes = f64::from(super::dot(&a, &b));
        assert!(
            (lanes - plain).abs() < 1e-3,
            "len {len}: {lanes} vs {plain}"
        );
    }
}

#[test]
fn keyword_only_scores_are_bm25_scaled_by_query_coverage() {
    let index = SearchIndex::build(&catalog(), None, Fusion::default()).unwrap();
    // "weather" matches one tool, "request" another: each covers part of the query.
    let q = "weather request body";
    let hits = search(&index, q, None, None);
    let allowed = index.allowed_for(None);
    let raw = index.keyword.search(q, 10, allowed).unwrap();
    assert_eq!(hits.len(), raw.len());
    for (bm25, i) in raw {
        let cov = index.coverage.of(&index.keyword, q, &[i])[0];
        assert!(cov > 0.0 && cov < 1.0, "{cov}");
        let hit = hits.iter().find(|h| h.index == i).unwrap();
        let want = bm25 * cov.powf(KEYWORD_ONLY_COVERAGE_POWER);
        assert!((hit.score - want).abs() < 1e-5, "{} vs {want}", hit.score);
    }
}

#[test]
fn a_tools_passages_combine_by_max_weight() {
    // Passage "x" lies along the first axis, "y" along the second; the query along "x".
    let embedder = Embedder::from_fn("axes", |texts| {
        Ok(texts
            .iter()
            .map(|t| {
                if t.starts_with('x') {
                    vec![1.0, 0.0]
                } else {
                    vec![0.0, 1.0]
                }
            })
            .collect())
    });
    let cache = EmbeddingCache::new(None).unwrap();
    let tools = vec![tool(&["public"], "both", "")];
    let passages = |_: &Tool, _: &str| vec!["x".to_string(), "y".to_string()];
    for (max_weight, cos) in [(0.0, 0.5), (1.0, 1.0), (0.5, 0.75)] {
        let index = SearchIndex::build_with(
            &tools,
            Some((&embedder, &cache)),
            Fusion::default(),
            (&passages, max_weight),
            &|| false,
        )
        .unwrap();
        let hits = index
            .search(
                "q",
                Some(&[1.0, 0.0]),
                Mode::Semantic,
                index.allowed_for(None),
                None,
                1,
            )
            .unwrap();
        let want = Fusion::default().semantic_only(cos);
        assert!(
            (hits[0].score - want).abs() < 1e-5,
            "{max_weight}: {hits:?}"
        );
    }
}

#[test]
fn a_tool_is_embedded_from_its_description_and_its_card_in_words() {
    let mut weather = tool(&["public"], "getWeather", " Current weather for a city. ");
    for (name, description) in [("cityName", "The city."), ("units", "")] {
        weather.params.push(Param {
            name: name.into(),
            description: description.into(),
            ..Param::default()
        });
    }
    assert_eq!(
        embedding_texts(&weather, &mcc_catalog::signature(&weather)),
        [
            "Current weather for a city.",
            "get weather: Current weather for a city. city name The city.; units",
        ]
    );
    // Without a description, the card alone: one text, so the tool's vector is its own.
    let bare = tool(&["ops"], "list_pods", "");
    assert_eq!(
        embedding_texts(&bare, &mcc_catalog::signature(&bare)),
        ["ops list pods:"]
    );
}
