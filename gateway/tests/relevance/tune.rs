//! Tuning aids for paraphrase search (issue 14, target 5), run by hand:
//! `cargo test --release -p mcc-gateway --test relevance -- --ignored --nocapture tune_`.
//! Each prints one line per setting with the metrics on the suite's even-numbered queries
//! (the tuning half: choose on these), the odd-numbered ones (held out), the suite's
//! paraphrase queries, and the held-out paraphrases of paraphrases_heldout.yaml (never
//! chosen on; a setting that lowers them is no improvement). Fusion is recomputed here
//! from the index's keyword scores and the model's cosines, so many settings are compared
//! without rebuilding an index; the chosen one is then implemented in src/search and
//! measured by `relevance_suite`.

use mcc_catalog::Tool;
use mcc_search::{Embedder, Mode, SearchIndex, dot};

use crate::eval::{self, Case, Metrics};

/// One query, ready to fuse: BM25 per tool (0 when it did not match), its embedding, and
/// the positions of the tools that answer it.
struct Prepared {
    bm25: Vec<f32>,
    /// Per tool, the IDF-weighted share of the query's words it contains (fuzzy at half).
    cov: Vec<f32>,
    qv: Vec<f32>,
    expected: Vec<usize>,
}

/// The query sets every setting is reported on.
struct Sets {
    tune: Vec<Prepared>,
    tune_para: Vec<Prepared>,
    held: Vec<Prepared>,
    paraphrases: Vec<Prepared>,
    heldout: Vec<Prepared>,
}

fn prepare(
    tools: &[Tool],
    keyword: &SearchIndex,
    embedder: &Embedder,
    cases: &[Case],
    query_prefix: &str,
) -> Vec<Prepared> {
    let allowed = keyword.allowed_for(Some(&eval::admin()));
    let texts: Vec<String> = cases
        .iter()
        .map(|c| format!("{query_prefix}{}", c.query))
        .collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let vectors = embedder.embed(&refs).expect("embedding queries");
    cases
        .iter()
        .zip(vectors)
        .map(|(c, qv)| {
            let mut bm25 = vec![0.0; tools.len()];
            let hits = keyword
                .search(&c.query, None, Mode::Keyword, allowed.clone(), None, 100)
                .expect("keyword search");
            for h in hits {
                bm25[h.index] = h.score;
            }
            let expected = c
                .expected
                .iter()
                .filter_map(|k| tools.iter().position(|t| &t.key == k))
                .collect();
            let cov = coverage(tools, &c.query);
            Prepared {
                bm25,
                cov,
                qv,
                expected,
            }
        })
        .collect()
}

fn sets(tools: &[Tool], keyword: &SearchIndex, embedder: &Embedder, prefix: &str) -> Sets {
    let cases = eval::cases(tools);
    let paraphrases = eval::paraphrases_of(tools, &cases);
    let heldout = eval::heldout_paraphrases(tools);
    let (tune, held): (Vec<_>, Vec<_>) = cases
        .iter()
        .cloned()
        .enumerate()
        .partition(|(i, _)| i % 2 == 0);
    let strip = |v: Vec<(usize, Case)>| v.into_iter().map(|(_, c)| c).collect::<Vec<_>>();
    let p = |c: &[Case]| prepare(tools, keyword, embedder, c, prefix);
    Sets {
        tune: p(&strip(tune)),
        tune_para: p(&eval::tune_paraphrases(tools)),
        held: p(&strip(held)),
        paraphrases: p(&paraphrases),
        heldout: p(&heldout),
    }
}

/// Tool vectors: one or more per tool.
type ToolVectors = Vec<Vec<Vec<f32>>>;

fn embed_tools(
    embedder: &Embedder,
    tools: &[Tool],
    text: &dyn Fn(&Tool) -> Vec<String>,
) -> ToolVectors {
    let per_tool: Vec<Vec<String>> = tools.iter().map(text).collect();
    let flat: Vec<&str> = per_tool.iter().flatten().map(String::as_str).collect();
    let mut vectors = embedder.embed(&flat).expect("embedding tools").into_iter();
    per_tool
        .iter()
        .map(|texts| texts.iter().map(|_| vectors.next().unwrap()).collect())
        .collect()
}

/// The analyzed terms of every keyword field of `t`.
fn tool_terms(t: &Tool) -> std::collections::HashSet<String> {
    use mcc_search::keyword::{analyze, analyzer};
    let params: Vec<String> = t
        .visible_params()
        .map(|p| format!("{} {}", p.name, p.description))
        .collect();
    let text = format!(
        "{} {} {} {} {} {}",
        t.name,
        t.key,
        t.groups.join(" "),
        t.description,
        params.join(" "),
        t.example
    );
    analyze(&mut analyzer(), &text).into_iter().collect()
}

fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for i in 1..=a.len() {
        let mut cur = vec![i; b.len() + 1];
        for j in 1..=b.len() {
            let sub = prev[j - 1] + usize::from(a[i - 1] != b[j - 1]);
            cur[j] = sub.min(prev[j] + 1).min(cur[j - 1] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// Per tool: the IDF-weighted share of the query's distinct analyzed words it contains
/// (an exact term counts 1, one within the keyword index's AUTO fuzziness 0.5). Words
/// no tool contains count in the denominator (with the highest IDF), so a query the
/// catalog's words explain only in part covers no tool fully.
fn coverage(tools: &[Tool], query: &str) -> Vec<f32> {
    use mcc_search::keyword::{analyze, analyzer, auto_fuzziness};
    let terms: Vec<std::collections::HashSet<String>> = tools.iter().map(tool_terms).collect();
    let mut words = analyze(&mut analyzer(), query);
    words.sort();
    words.dedup();
    let n = tools.len() as f32;
    let mut total = 0.0;
    let mut cov = vec![0.0f32; tools.len()];
    for w in &words {
        let d = auto_fuzziness(w.chars().count()) as usize;
        let mut weight = vec![0.0f32; tools.len()];
        for (i, ts) in terms.iter().enumerate() {
            if ts.contains(w) {
                weight[i] = 1.0;
            } else if d > 0 && ts.iter().any(|t| edit_distance(t, w) <= d) {
                weight[i] = 0.5;
            }
        }
        let df = weight.iter().filter(|&&x| x > 0.0).count() as f32;
        let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
        total += idf;
        for (c, x) in cov.iter_mut().zip(&weight) {
            *c += x * idf;
        }
    }
    if total > 0.0 {
        for c in &mut cov {
            *c /= total;
        }
    }
    cov
}

/// How one tool's several cosines become one.
#[derive(Clone, Copy, Debug)]
enum Agg {
    Max,
    Mean,
}

fn cosines(vectors: &ToolVectors, q: &[f32], agg: Agg) -> Vec<f32> {
    vectors
        .iter()
        .map(|vs| {
            let c = vs.iter().map(|v| dot(v, q));
            match agg {
                Agg::Max => c.fold(f32::MIN, f32::max),
                Agg::Mean => c.sum::<f32>() / vs.len() as f32,
            }
        })
        .collect()
}

/// A fusion of the two signals into one score per tool.
#[derive(Clone, Copy, Debug)]
enum Fuse {
    /// Today's: 10 * (kw * k + (1 - kw) * s) with k = bm25/(bm25+sat) and s the floored cosine.
    Score { kw: f32, sat: f32, floor: f32 },
    /// Reciprocal rank fusion over the top 100 of each ranking.
    Rrf { k: f32, kw: f32 },
    /// Keyword as a boost of the semantic signal: 10 * s * ((1 - kw) + kw * k), so
    /// keyword evidence reorders tools of similar meaning but cannot lift an unrelated one.
    Mul { kw: f32, sat: f32, floor: f32 },
    /// Today's sum with the keyword signal multiplied by the tool's query coverage^gamma.
    Cov {
        kw: f32,
        sat: f32,
        floor: f32,
        gamma: f32,
    },
    /// Today's sum with the keyword signal relative to the query's best BM25.
    Relative { kw: f32, floor: f32 },
}

fn ranks(scores: &[f32], keep: impl Fn(f32) -> bool) -> Vec<Option<usize>> {
    let mut order: Vec<usize> = (0..scores.len()).filter(|&i| keep(scores[i])).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
    let mut out = vec![None; scores.len()];
    for (r, &i) in order.iter().take(100).enumerate() {
        out[i] = Some(r);
    }
    out
}

fn fuse_p(f: Fuse, p: &Prepared, cos: &[f32]) -> Vec<f32> {
    match f {
        Fuse::Cov {
            kw,
            sat,
            floor,
            gamma,
        } => p
            .bm25
            .iter()
            .zip(cos)
            .zip(&p.cov)
            .map(|((&b, &c), &v)| {
                let k = b / (b + sat);
                let s = ((c - floor) / (1.0 - floor)).clamp(0.0, 1.0);
                10.0 * (kw * k * v.powf(gamma) + (1.0 - kw) * s)
            })
            .collect(),
        _ => fuse(f, &p.bm25, cos),
    }
}

fn fuse(f: Fuse, bm25: &[f32], cos: &[f32]) -> Vec<f32> {
    match f {
        Fuse::Cov { .. } => unreachable!("fuse_p"),
        Fuse::Score { kw, sat, floor } => bm25
            .iter()
            .zip(cos)
            .map(|(&b, &c)| {
                let k = b / (b + sat);
                let s = ((c - floor) / (1.0 - floor)).clamp(0.0, 1.0);
                10.0 * (kw * k + (1.0 - kw) * s)
            })
            .collect(),
        Fuse::Mul { kw, sat, floor } => bm25
            .iter()
            .zip(cos)
            .map(|(&b, &c)| {
                let k = b / (b + sat);
                let s = ((c - floor) / (1.0 - floor)).clamp(0.0, 1.0);
                10.0 * s * ((1.0 - kw) + kw * k)
            })
            .collect(),
        Fuse::Relative { kw, floor } => {
            let best = bm25
                .iter()
                .copied()
                .fold(0.0f32, f32::max)
                .max(f32::EPSILON);
            bm25.iter()
                .zip(cos)
                .map(|(&b, &c)| {
                    let s = ((c - floor) / (1.0 - floor)).clamp(0.0, 1.0);
                    10.0 * (kw * b / best + (1.0 - kw) * s)
                })
                .collect()
        }
        Fuse::Rrf { k, kw } => {
            let rk = ranks(bm25, |b| b > 0.0);
            let rs = ranks(cos, |_| true);
            rk.iter()
                .zip(&rs)
                .map(|(a, b)| {
                    let part = |r: &Option<usize>| r.map_or(0.0, |r| 1.0 / (k + r as f32 + 1.0));
                    kw * part(a) + (1.0 - kw) * part(b)
                })
                .collect()
        }
    }
}

fn metrics(set: &[Prepared], score: &dyn Fn(&Prepared) -> Vec<f32>) -> Metrics {
    let mut m = Metrics::default();
    for p in set {
        let s = score(p);
        let mut order: Vec<usize> = (0..s.len()).collect();
        order.sort_by(|&a, &b| s[b].total_cmp(&s[a]).then(a.cmp(&b)));
        if let Some(r) = order.iter().take(10).position(|i| p.expected.contains(i)) {
            m.recall_at_1 += f64::from(r == 0);
            m.recall_at_5 += f64::from(r < 5);
            m.mrr += 1.0 / (r as f64 + 1.0);
        }
    }
    let n = set.len() as f64;
    Metrics {
        recall_at_1: m.recall_at_1 / n,
        recall_at_5: m.recall_at_5 / n,
        mrr: m.mrr / n,
    }
}

fn report(label: &str, sets: &Sets, score: &dyn Fn(&Prepared) -> Vec<f32>) {
    let f = |m: Metrics| format!("{:.3}/{:.3}/{:.3}", m.recall_at_1, m.recall_at_5, m.mrr);
    let (t, h) = (metrics(&sets.tune, score), metrics(&sets.held, score));
    let both = Metrics {
        recall_at_1: (t.recall_at_1 * sets.tune.len() as f64
            + h.recall_at_1 * sets.held.len() as f64)
            / (sets.tune.len() + sets.held.len()) as f64,
        recall_at_5: (t.recall_at_5 * sets.tune.len() as f64
            + h.recall_at_5 * sets.held.len() as f64)
            / (sets.tune.len() + sets.held.len()) as f64,
        mrr: (t.mrr * sets.tune.len() as f64 + h.mrr * sets.held.len() as f64)
            / (sets.tune.len() + sets.held.len()) as f64,
    };
    println!(
        "| {label} | {} | {} | {} | {} | {} | {} |",
        f(t),
        f(metrics(&sets.tune_para, score)),
        f(h),
        f(both),
        f(metrics(&sets.paraphrases, score)),
        f(metrics(&sets.heldout, score)),
    );
}

const HEADER: &str = "| setting | tune (even) r@1/r@5/MRR | tuning paraphrases | held (odd) | suite | suite paraphrases | held-out paraphrases |\n|---|---|---|---|---|---|---|";

fn words(name: &str) -> String {
    name.replace(['_', '-', '.'], " ")
}

fn params(t: &Tool) -> String {
    t.visible_params()
        .filter(|p| !p.description.is_empty())
        .map(|p| format!("{}: {}", words(&p.name), p.description))
        .collect::<Vec<_>>()
        .join(" ")
}

/// What a tool is embedded from: one text per vector.
type TextsOf = Box<dyn Fn(&Tool) -> Vec<String>>;

/// The texts a tool can be embedded from, by name.
fn text_variants() -> Vec<(&'static str, TextsOf)> {
    vec![
        (
            "signature (today)",
            Box::new(|t: &Tool| vec![mcc_catalog::signature(t)]),
        ),
        (
            "description",
            Box::new(|t: &Tool| vec![t.description.clone()]),
        ),
        (
            "name words: description",
            Box::new(|t: &Tool| vec![format!("{}: {}", words(&t.name), t.description)]),
        ),
        (
            "name (groups): description params",
            Box::new(|t: &Tool| {
                vec![format!(
                    "{} ({}): {} {}",
                    words(&t.name),
                    t.groups.join(", "),
                    t.description,
                    params(t)
                )]
            }),
        ),
        (
            "name: description params example",
            Box::new(|t: &Tool| {
                vec![format!(
                    "{}: {} {} {}",
                    words(&t.name),
                    t.description,
                    params(t),
                    t.example
                )]
            }),
        ),
        (
            "description + signature (2 vectors)",
            Box::new(|t: &Tool| vec![t.description.clone(), mcc_catalog::signature(t)]),
        ),
        (
            "name words + description + signature (3 vectors)",
            Box::new(|t: &Tool| {
                vec![
                    words(&t.name),
                    t.description.clone(),
                    mcc_catalog::signature(t),
                ]
            }),
        ),
        (
            "name: description + signature (2 vectors)",
            Box::new(|t: &Tool| {
                vec![
                    format!("{}: {}", words(&t.name), t.description),
                    mcc_catalog::signature(t),
                ]
            }),
        ),
    ]
}

struct Fixture {
    tools: Vec<Tool>,
    keyword: SearchIndex,
    embedder: Embedder,
}

fn fixture() -> Option<Fixture> {
    let dir = eval::model_dir().ok()?;
    let tools = eval::catalog();
    let keyword = SearchIndex::build(&tools, None, Default::default()).unwrap();
    let embedder = Embedder::local(&dir).unwrap();
    Some(Fixture {
        tools,
        keyword,
        embedder,
    })
}

const TODAY: Fuse = Fuse::Score {
    kw: 0.3,
    sat: 8.0,
    floor: 0.1,
};

/// What text of a tool is embedded: each variant with today's fusion, semantic-only and
/// hybrid, one vector per text and, for several, the max and the mean of the cosines.
#[test]
#[ignore = "tuning aid, prints a table"]
fn tune_embedded_text() {
    let Some(fx) = fixture() else { return };
    let sets = sets(&fx.tools, &fx.keyword, &fx.embedder, "");
    println!("{HEADER}");
    for (name, text) in text_variants() {
        let vectors = embed_tools(&fx.embedder, &fx.tools, &*text);
        let aggs: &[Agg] = if vectors[0].len() > 1 {
            &[Agg::Max, Agg::Mean]
        } else {
            &[Agg::Max]
        };
        for &agg in aggs {
            let label = if vectors[0].len() > 1 {
                format!("{name}, {agg:?}")
            } else {
                name.to_string()
            };
            let sem = |p: &Prepared| cosines(&vectors, &p.qv, agg);
            report(&format!("{label}: semantic-only"), &sets, &sem);
            let hyb = |p: &Prepared| fuse(TODAY, &p.bm25, &cosines(&vectors, &p.qv, agg));
            report(&format!("{label}: hybrid"), &sets, &hyb);
        }
    }
}

/// Query and passage prefixes (e5/bge style; MiniLM declares none) on today's text.
#[test]
#[ignore = "tuning aid, prints a table"]
fn tune_prefixes() {
    let Some(fx) = fixture() else { return };
    println!("{HEADER}");
    for (qp, pp) in [
        ("", ""),
        ("query: ", "passage: "),
        ("query: ", ""),
        (
            "Represent this sentence for searching relevant passages: ",
            "",
        ),
    ] {
        let sets = sets(&fx.tools, &fx.keyword, &fx.embedder, qp);
        let vectors = embed_tools(&fx.embedder, &fx.tools, &|t: &Tool| {
            vec![format!("{pp}{}", mcc_catalog::signature(t))]
        });
        let label = format!("query {qp:?}, passage {pp:?}");
        let sem = |p: &Prepared| cosines(&vectors, &p.qv, Agg::Max);
        report(&format!("{label}: semantic-only"), &sets, &sem);
        let hyb = |p: &Prepared| fuse(TODAY, &p.bm25, &cosines(&vectors, &p.qv, Agg::Max));
        report(&format!("{label}: hybrid"), &sets, &hyb);
    }
}

/// Fusion: today's score fusion over a grid, and reciprocal rank fusion, for the text
/// named by `TUNE_TEXT` (a label of `text_variants`, default today's signature).
#[test]
#[ignore = "tuning aid, prints a table"]
fn tune_fusion_methods() {
    let Some(fx) = fixture() else { return };
    let want = std::env::var("TUNE_TEXT").unwrap_or_else(|_| "signature (today)".into());
    let (_, text) = text_variants()
        .into_iter()
        .find(|(n, _)| *n == want)
        .expect("TUNE_TEXT names a text variant");
    let agg = match std::env::var("TUNE_AGG").as_deref() {
        Ok("mean") => Agg::Mean,
        _ => Agg::Max,
    };
    let sets = sets(&fx.tools, &fx.keyword, &fx.embedder, "");
    let vectors = embed_tools(&fx.embedder, &fx.tools, &*text);
    println!("text: {want}, {agg:?}\n{HEADER}");
    for kw in [0.1f32, 0.2, 0.3, 0.4] {
        for sat in [2.0f32, 4.0, 8.0, 16.0] {
            for floor in [0.0f32, 0.1, 0.2, 0.3] {
                let f = Fuse::Score { kw, sat, floor };
                let s = |p: &Prepared| fuse(f, &p.bm25, &cosines(&vectors, &p.qv, agg));
                report(&format!("{f:?}"), &sets, &s);
            }
        }
    }
    for kw in [0.1f32, 0.2, 0.3, 0.4, 0.5, 0.6] {
        for sat in [2.0f32, 4.0, 8.0, 16.0] {
            for floor in [0.0f32, 0.1, 0.2] {
                let f = Fuse::Mul { kw, sat, floor };
                let s = |p: &Prepared| fuse(f, &p.bm25, &cosines(&vectors, &p.qv, agg));
                report(&format!("{f:?}"), &sets, &s);
            }
        }
    }
    for kw in [0.2f32, 0.3, 0.4, 0.5] {
        for sat in [2.0f32, 4.0, 8.0] {
            for floor in [0.0f32, 0.1, 0.2] {
                for gamma in [1.0f32, 2.0, 3.0] {
                    let f = Fuse::Cov {
                        kw,
                        sat,
                        floor,
                        gamma,
                    };
                    let s = |p: &Prepared| fuse_p(f, p, &cosines(&vectors, &p.qv, agg));
                    report(&format!("{f:?}"), &sets, &s);
                }
            }
        }
    }
    for kw in [0.1f32, 0.2, 0.3, 0.4] {
        for floor in [0.0f32, 0.1, 0.2] {
            let f = Fuse::Relative { kw, floor };
            let s = |p: &Prepared| fuse(f, &p.bm25, &cosines(&vectors, &p.qv, agg));
            report(&format!("{f:?}"), &sets, &s);
        }
    }
    for k in [5.0f32, 10.0, 20.0, 60.0] {
        for kw in [0.2f32, 0.3, 0.4, 0.5] {
            let f = Fuse::Rrf { k, kw };
            let s = |p: &Prepared| fuse(f, &p.bm25, &cosines(&vectors, &p.qv, agg));
            report(&format!("{f:?}"), &sets, &s);
        }
    }
}
