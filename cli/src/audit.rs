//! `mcc audit`: the audit trail, newest first, filtered and printed as a table, JSON
//! lines, a JSON array or CSV. Read from the Redis stream of the settings'
//! `audit.stream` with the gateway's own reader ([`mcc_gateway::audit::read`]), or with
//! `--url` from a gateway's `GET /v1/audit` (members of `admin`; inside a cluster Redis
//! sits behind a password). Either way the reader pages; this module gathers pages up to
//! `--offset` + `--limit` events and prints them.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use clap::{Args, ValueEnum};
use mcc_gateway::audit::AuditEvent;
use mcc_gateway::audit::read::{self, Filter, FilterText, MAX_PAGE};
use mcc_gateway::config::{self, FeatureRedis};
use mcc_gateway::redis_conn::Redis;
use serde::Deserialize;

use crate::output::Format;

/// Events `mcc audit` prints at most (`--limit`).
pub const MAX_LIMIT: u32 = 10_000;
/// Pages read at most for one listing (each reads a bounded part of the trail).
const MAX_PAGES: usize = 1000;
/// The longest answer of `GET /v1/audit` read (a page is at most 4 MiB of events).
const MAX_RESPONSE_BYTES: usize = 8 << 20;
/// The longest cell of the table (JSON and CSV are never cut).
const MAX_CELL: usize = 60;

#[derive(Args)]
pub struct AuditArgs {
    /// `tool` (execute events) or `search`; both when left out (MCC: `mcc audit tool|search`).
    #[arg(value_enum)]
    pub kind: Option<Kind>,
    /// Only this user's events.
    #[arg(long)]
    pub user: Option<String>,
    /// Only this tool key's events.
    #[arg(long, visible_alias = "tool-key")]
    pub tool: Option<String>,
    /// Only events with this outcome (success, failure, error, unknown, unauthorized,
    /// invalid, rate_limited, cancelled, input_required, not_approved).
    #[arg(long)]
    pub outcome: Option<String>,
    /// Only searches whose query contains this text (case-insensitive).
    #[arg(long)]
    pub query: Option<String>,
    /// Only events at or after: RFC 3339, a UTC date (2026-12-01) or an age (30m, 12h, 7d).
    #[arg(long)]
    pub since: Option<String>,
    /// Only events at or before (same forms as --since).
    #[arg(long)]
    pub until: Option<String>,
    /// Events to print at most.
    #[arg(long, short = 'l', default_value_t = 20,
          value_parser = clap::value_parser!(u32).range(1..=MAX_LIMIT as i64))]
    pub limit: u32,
    /// Matching events to skip first (the newest).
    #[arg(long, default_value_t = 0,
          value_parser = clap::value_parser!(u32).range(0..=100_000))]
    pub offset: u32,
    /// table, jsonl (one event per line), json (one array) or csv; `--json` means json.
    #[arg(long, short = 'f', value_enum)]
    pub format: Option<AuditFormat>,
    /// Write to this file instead of stdout.
    #[arg(long = "output-file", short = 'O', value_name = "PATH")]
    pub output_file: Option<PathBuf>,
    /// A gateway (its /mcp endpoint or base URL): read its GET /v1/audit as the
    /// credential's user (a member of admin). Without it: the settings' Redis stream.
    #[arg(long, env = "MCC_URL")]
    pub url: Option<String>,
    /// The credential for --url (an API key or a bearer token).
    #[arg(long, env = "MCC_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// The gateway settings file naming the stream (`audit.stream`) and its Redis
    /// (default: MCC_SETTINGS_FILE, and MCC_* / REDIS_URL).
    #[arg(long, short = 'c')]
    pub config: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Kind {
    /// execute events.
    #[value(alias = "execute")]
    Tool,
    Search,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum AuditFormat {
    Table,
    Jsonl,
    Json,
    Csv,
}

/// Where pages come from.
enum Reader {
    Local(read::Stream),
    Remote {
        http: reqwest::Client,
        endpoint: String,
        token: Option<String>,
    },
}

/// The `GET /v1/audit` answer (the page, or the error body).
#[derive(Deserialize)]
struct RemotePage {
    events: Vec<AuditEvent>,
    next: Option<String>,
}

#[derive(Deserialize)]
struct RemoteError {
    error: String,
    message: String,
}

pub async fn run(args: AuditArgs, global: Format) -> anyhow::Result<ExitCode> {
    let format = match (args.format, global) {
        (Some(f), _) => f,
        (None, Format::Json) => AuditFormat::Json,
        (None, Format::Text) => AuditFormat::Table,
    };
    let mut text = FilterText {
        event: args.kind.map(|k| match k {
            Kind::Tool => "execute".to_string(),
            Kind::Search => "search".to_string(),
        }),
        user: args.user.clone(),
        tool: args.tool.clone(),
        outcome: args.outcome.clone(),
        query: args.query.clone(),
        since: args.since.clone(),
        until: args.until.clone(),
    };
    let filter = Filter::parse(&text, chrono::Utc::now())
        .map_err(|e| anyhow!("--{}: {}", e.param, e.reason))?;
    // Ages become fixed times, so every page (and the gateway) sees one window.
    let stamp =
        |t: chrono::DateTime<chrono::Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    text.since = filter.since.map(stamp);
    text.until = filter.until.map(stamp);
    let reader = match &args.url {
        Some(url) => remote(url, args.token.clone(), args.config.is_some())?,
        None => local(&args).await?,
    };
    let want = (args.offset + args.limit) as usize;
    let mut events = Vec::new();
    let mut cursor: Option<String> = None;
    let mut complete = false;
    for _ in 0..MAX_PAGES {
        let limit = (want - events.len()).min(MAX_PAGE);
        let (page, next) = reader
            .page(&filter, &text, limit, cursor.as_deref())
            .await?;
        events.extend(page);
        if events.len() >= want || next.is_none() {
            complete = true;
            break;
        }
        cursor = next;
    }
    if !complete {
        eprintln!(
            "warning: stopped after {MAX_PAGES} pages with {} events; narrow with --since/--until",
            events.len()
        );
    }
    let events: Vec<AuditEvent> = events
        .into_iter()
        .skip(args.offset as usize)
        .take(args.limit as usize)
        .collect();
    let mut out = String::new();
    render(&events, format, &mut out);
    if events.is_empty() && format == AuditFormat::Table {
        eprintln!("No audit events found.");
    }
    match &args.output_file {
        Some(path) => {
            std::fs::write(path, out)
                .with_context(|| format!("--output-file {}: cannot write", path.display()))?;
            eprintln!("Wrote {} events to {}", events.len(), path.display());
        }
        None => {
            let mut stdout = std::io::stdout().lock();
            stdout.write_all(out.as_bytes())?;
            stdout.flush()?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The stream of the settings' `audit.stream`, over the gateway's Redis connection.
async fn local(args: &AuditArgs) -> anyhow::Result<Reader> {
    if args.token.is_some() {
        bail!("--token is for --url (a gateway); without --url the trail is read from Redis");
    }
    let env = |name: &str| std::env::var(name).ok();
    let file = config::settings_path(args.config.clone(), &env);
    let settings = config::load(file.as_deref(), &env)?;
    let Some(key) = settings.audit.stream.clone() else {
        bail!(
            "the settings keep no audit trail to read: audit.stream is unset (set it, or \
             MCC_AUDIT__STREAM, as the gateway's; on a cluster use --url)"
        );
    };
    let (setting, url) = match settings.feature_redis(settings.audit.redis_url.as_deref()) {
        FeatureRedis::Own(url) => ("audit.redis_url", url),
        FeatureRedis::Session(url) => ("session.redis_url", url),
        FeatureRedis::None => bail!(
            "audit.stream {key}: no Redis to read it from (set audit.redis_url, or REDIS_URL)"
        ),
    };
    let timeout = Duration::from_millis(settings.session.timeout_ms.max(1));
    let redis = Redis::connect(setting, url, &settings.session.redis_options(), timeout)
        .map_err(|e| anyhow!("{}: {}", e.setting, e.reason))?;
    Ok(Reader::Local(read::Stream::new(key, redis.conn())))
}

/// A gateway's `GET /v1/audit`.
fn remote(url: &str, token: Option<String>, config: bool) -> anyhow::Result<Reader> {
    if config {
        bail!("--config is for reading Redis locally and cannot be used with --url {url}");
    }
    let mcp = crate::remote::endpoint(url)?;
    let base = mcp.strip_suffix("/mcp").unwrap_or(&mcp);
    mcc_gateway::tls::install_crypto_provider();
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .context("starting the HTTP client")?;
    Ok(Reader::Remote {
        http,
        endpoint: format!("{base}/v1/audit"),
        token,
    })
}

impl Reader {
    async fn page(
        &self,
        filter: &Filter,
        text: &FilterText,
        limit: usize,
        cursor: Option<&str>,
    ) -> anyhow::Result<(Vec<AuditEvent>, Option<String>)> {
        match self {
            Reader::Local(stream) => {
                let page = stream.page(filter, limit, cursor).await?;
                if page.unreadable > 0 {
                    eprintln!(
                        "warning: {} entries of {} are not audit events (skipped)",
                        page.unreadable,
                        stream.key()
                    );
                }
                Ok((page.events, page.next))
            }
            Reader::Remote {
                http,
                endpoint,
                token,
            } => {
                let mut query: Vec<(&str, String)> = vec![("limit", limit.to_string())];
                for (name, value) in [
                    ("event", &text.event),
                    ("user", &text.user),
                    ("tool", &text.tool),
                    ("outcome", &text.outcome),
                    ("query", &text.query),
                    ("since", &text.since),
                    ("until", &text.until),
                ] {
                    if let Some(v) = value {
                        query.push((name, v.clone()));
                    }
                }
                if let Some(c) = cursor {
                    query.push(("cursor", c.to_string()));
                }
                let mut url = reqwest::Url::parse(endpoint)
                    .with_context(|| format!("--url: {endpoint} is not a URL"))?;
                url.query_pairs_mut().extend_pairs(&query);
                let mut request = http.get(url);
                if let Some(t) = token {
                    request = request.bearer_auth(t);
                }
                let mut response = request.send().await.map_err(|e| {
                    anyhow!("--url: cannot reach {endpoint} (is the gateway running, is the URL right?): {e}")
                })?;
                let status = response.status();
                let mut body = Vec::new();
                while let Some(chunk) = response
                    .chunk()
                    .await
                    .with_context(|| format!("{endpoint}: reading the answer"))?
                {
                    body.extend_from_slice(&chunk);
                    if body.len() > MAX_RESPONSE_BYTES {
                        bail!("{endpoint}: the answer is over {MAX_RESPONSE_BYTES} bytes");
                    }
                }
                if !status.is_success() {
                    let said = serde_json::from_slice::<RemoteError>(&body)
                        .map(|e| format!("{}: {}", e.error, e.message))
                        .unwrap_or_else(|_| {
                            String::from_utf8_lossy(&body).chars().take(200).collect()
                        });
                    let hint = match status.as_u16() {
                        401 if token.is_none() => " (pass --token or set MCC_TOKEN)",
                        401 => " (--token: unknown, expired or revoked credential)",
                        403 => " (--token: the audit trail is for members of the admin group)",
                        _ => "",
                    };
                    bail!("{endpoint}: {status}: {said}{hint}");
                }
                let page: RemotePage = serde_json::from_slice(&body)
                    .with_context(|| format!("{endpoint}: not an audit page"))?;
                Ok((page.events, page.next))
            }
        }
    }
}

/// The CSV and table columns (MCC's are Timestamp, User, Tool, Status, Duration (ms),
/// Error; ours are the event's fields).
const COLUMNS: &[&str] = &[
    "time",
    "event",
    "user",
    "credential",
    "key_prefix",
    "tool",
    "outcome",
    "exit_code",
    "duration_ms",
    "bytes_out",
    "cached",
    "params_hash",
    "params",
    "query",
    "min_score",
    "reason",
];

fn cells(e: &AuditEvent) -> Vec<String> {
    let opt = |v: &Option<String>| v.clone().unwrap_or_default();
    vec![
        e.time.clone(),
        e.event.clone(),
        e.user.clone(),
        e.credential.clone(),
        opt(&e.key_prefix),
        opt(&e.tool),
        e.outcome.clone(),
        e.exit_code.map(|c| c.to_string()).unwrap_or_default(),
        format!("{:.1}", e.duration_ms),
        e.bytes_out.to_string(),
        e.cached.to_string(),
        opt(&e.params_hash),
        e.params
            .as_ref()
            .map(|p| serde_json::Value::Object(p.clone()).to_string())
            .unwrap_or_default(),
        opt(&e.query),
        e.min_score.map(|s| s.to_string()).unwrap_or_default(),
        opt(&e.reason),
    ]
}

pub fn render(events: &[AuditEvent], format: AuditFormat, out: &mut String) {
    match format {
        AuditFormat::Jsonl => {
            for e in events {
                out.push_str(&serde_json::to_string(e).unwrap_or_default());
                out.push('\n');
            }
        }
        AuditFormat::Json => {
            out.push_str(&serde_json::to_string_pretty(events).unwrap_or_default());
            out.push('\n');
        }
        AuditFormat::Csv => {
            out.push_str(&COLUMNS.join(","));
            out.push_str("\r\n");
            for e in events {
                let row: Vec<String> = cells(e).iter().map(|c| csv_field(c)).collect();
                out.push_str(&row.join(","));
                out.push_str("\r\n");
            }
        }
        AuditFormat::Table => table(events, out),
    }
}

/// One CSV field (RFC 4180), made inert for spreadsheets: a caller's text starting
/// with `=`, `+`, `-`, `@` (a formula) gets a leading `'` (OWASP's advice), so a search
/// query cannot run in the admin's spreadsheet. Numbers are ours and never start so,
/// except a negative exit code, which stays a number.
fn csv_field(value: &str) -> String {
    let formula = value.starts_with(['=', '+', '@', '\t', '\r'])
        || (value.starts_with('-') && value.parse::<f64>().is_err());
    let value = if formula {
        format!("'{value}")
    } else {
        value.to_string()
    };
    if value.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", value.replace('"', "\"\""))
    } else {
        value
    }
}

/// A table cell: control characters shown escaped (a caller's text never moves the
/// admin's terminal), cut to [`MAX_CELL`] characters, `-` when empty.
fn cell(value: &str) -> String {
    if value.is_empty() {
        return "-".into();
    }
    let shown: String = value
        .chars()
        .flat_map(|c| {
            if c.is_control() {
                c.escape_default().collect::<Vec<_>>()
            } else {
                vec![c]
            }
        })
        .collect();
    if shown.chars().count() > MAX_CELL {
        let mut cut: String = shown.chars().take(MAX_CELL - 1).collect();
        cut.push('…');
        cut
    } else {
        shown
    }
}

fn table(events: &[AuditEvent], out: &mut String) {
    let header = [
        "TIME",
        "USER",
        "EVENT",
        "TOOL/QUERY",
        "OUTCOME",
        "EXIT",
        "MS",
        "REASON",
    ];
    let rows: Vec<Vec<String>> = events
        .iter()
        .map(|e| {
            let what = match (&e.tool, &e.query) {
                (Some(t), _) => t.clone(),
                (None, Some(q)) => format!("\"{q}\""),
                (None, None) => String::new(),
            };
            vec![
                cell(&e.time),
                cell(&e.user),
                cell(&e.event),
                cell(&what),
                cell(&e.outcome),
                cell(&e.exit_code.map(|c| c.to_string()).unwrap_or_default()),
                format!("{:.1}", e.duration_ms),
                cell(e.reason.as_deref().unwrap_or("")),
            ]
        })
        .collect();
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut line = |cols: &[String]| {
        let mut text = String::new();
        for (i, (c, w)) in cols.iter().zip(&widths).enumerate() {
            if i + 1 == cols.len() {
                text.push_str(c);
            } else {
                text.push_str(&format!("{c:<w$}  "));
            }
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(&header.map(String::from));
    for row in &rows {
        line(row);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_quotes_and_defuses_formulas() {
        assert_eq!(csv_field("plain"), "plain");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_field("=HYPERLINK(\"x\")"), "\"'=HYPERLINK(\"\"x\"\")\"");
        assert_eq!(csv_field("-1"), "-1");
        assert_eq!(csv_field("-cmd"), "'-cmd");
    }

    #[test]
    fn table_cells_escape_control_characters() {
        assert_eq!(cell("\u{1b}[2Jx\ny"), "\\u{1b}[2Jx\\ny");
        assert_eq!(cell(""), "-");
        assert_eq!(cell(&"x".repeat(100)).chars().count(), MAX_CELL);
    }
}
