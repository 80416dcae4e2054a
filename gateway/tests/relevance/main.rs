//! The relevance suite: ≥200 realistic tools (catalog/*.yaml) and ≥100 natural-language
//! queries (queries.yaml). Reports recall@1, recall@5 and MRR for keyword-only,
//! semantic-only and hybrid search, and checks hybrid beats both. Needs the model files
//! for the semantic and hybrid parts (scripts/fetch-model.sh); without them only the
//! keyword floor is checked and the test says so.

mod eval;

use mcc_gateway::search::{Mode, SearchService, SearchSettings};

#[test]
fn relevance_suite() {
    let tools = eval::catalog();
    let cases = eval::cases(&tools);
    assert!(tools.len() >= 200, "catalog has {} tools", tools.len());
    assert!(cases.len() >= 100, "suite has {} queries", cases.len());

    let keyword_service = SearchService::new(SearchSettings::default()).unwrap();
    keyword_service.rebuild_blocking(&tools).unwrap();
    let keyword = eval::evaluate(
        &keyword_service.current(),
        &keyword_service,
        &cases,
        Mode::Keyword,
    );
    println!("{}", eval::table(&[("keyword-only", keyword)]));
    assert!(
        keyword.recall_at_5 >= 0.6,
        "keyword recall@5 {:.3}",
        keyword.recall_at_5
    );

    let dir = match eval::model_dir() {
        Ok(d) => d,
        Err(why) => {
            eprintln!("SKIPPED semantic and hybrid relevance: {why}");
            return;
        }
    };
    let service = SearchService::new(SearchSettings {
        model_dir: Some(dir),
        ..SearchSettings::default()
    })
    .unwrap();
    service.rebuild_blocking(&tools).unwrap();
    let index = service.current();
    let semantic = eval::evaluate(&index, &service, &cases, Mode::Semantic);
    let hybrid = eval::evaluate(&index, &service, &cases, Mode::Hybrid);
    println!(
        "{}",
        eval::table(&[
            ("keyword-only", keyword),
            ("semantic-only", semantic),
            ("hybrid", hybrid)
        ])
    );
    for (name, other) in [("keyword", keyword), ("semantic", semantic)] {
        assert!(
            hybrid.mrr > other.mrr,
            "hybrid MRR {:.3} ≤ {name} {:.3}",
            hybrid.mrr,
            other.mrr
        );
        assert!(
            hybrid.recall_at_1 >= other.recall_at_1 && hybrid.recall_at_5 >= other.recall_at_5,
            "hybrid {hybrid:?} does not beat {name} {other:?}"
        );
    }
}
