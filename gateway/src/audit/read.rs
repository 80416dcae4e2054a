//! Reading the audit trail back from its Redis stream, for `mcc audit` (straight from
//! Redis) and `GET /v1/audit` (admins, where Redis is out of reach): the filters
//! ([`Filter`], parsed from text by [`Filter::parse`], whose errors name the parameter so
//! each surface can name its own flag), and the scan newest first in bounded pages
//! ([`Stream::page`]): at most [`MAX_PAGE`] events, [`MAX_SCAN`] entries read and
//! [`MAX_PAGE_BYTES`] bytes per page, the rest behind a cursor (the last entry id read).
//!
//! Time filters compare the event's own `time` (when the call began). The entry id is
//! when it was written, never earlier, so `since` also bounds the scan; `until` cannot
//! (a long call is written long after it began) and is a filter only.

use chrono::{DateTime, NaiveDate, Utc};
use serde::Deserialize;

use super::AuditEvent;
use super::sink::STREAM_FIELD;
use crate::redis_conn::Conn;

/// Events one page holds at most.
pub const MAX_PAGE: usize = 1000;
/// Events a page holds unless asked otherwise (REST).
pub const DEFAULT_PAGE: usize = 100;
/// Stream entries one page reads at most, matching or not (a narrow filter over a long
/// stream answers in several pages rather than one long scan).
pub const MAX_SCAN: usize = 10_000;
/// JSON bytes of the events of one page at most (events with `audit.params` can be big).
pub const MAX_PAGE_BYTES: usize = 4 << 20;
/// The longest filter text (user, tool, query) accepted.
pub const MAX_FILTER_BYTES: usize = 512;
/// Entries read per Redis command.
const CHUNK: usize = 500;
/// The oldest relative time accepted (`--since 3650d`).
const MAX_AGE_DAYS: i64 = 3650;

/// The outcomes events carry (see [`AuditEvent::outcome`]).
pub use crate::metrics::OUTCOMES;

/// The filters as text, named as REST names them (the CLI's flags are `--<name>`).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
pub struct FilterText {
    /// `execute` (MCC: `tool`) or `search`.
    pub event: Option<String>,
    pub user: Option<String>,
    pub tool: Option<String>,
    pub outcome: Option<String>,
    /// Case-insensitive substring of a search's query.
    pub query: Option<String>,
    pub since: Option<String>,
    pub until: Option<String>,
}

/// A filter value that cannot be used: the parameter (`since`, `outcome`…) and why.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{param}: {reason}")]
pub struct FilterError {
    pub param: &'static str,
    pub reason: String,
}

fn refuse(param: &'static str, reason: impl Into<String>) -> FilterError {
    FilterError {
        param,
        reason: reason.into(),
    }
}

/// Which events pass; every field set must match.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Filter {
    pub event: Option<String>,
    pub user: Option<String>,
    pub tool: Option<String>,
    pub outcome: Option<String>,
    /// Lowercased.
    pub query: Option<String>,
    pub since: Option<DateTime<Utc>>,
    pub until: Option<DateTime<Utc>>,
}

impl Filter {
    /// The filter `text` describes, relative times counted back from `now`.
    pub fn parse(text: &FilterText, now: DateTime<Utc>) -> Result<Self, FilterError> {
        let event = match text.event.as_deref() {
            None => None,
            Some("execute" | "tool") => Some("execute".to_string()),
            Some("search") => Some("search".to_string()),
            Some(other) => {
                return Err(refuse(
                    "event",
                    format!(
                        "'{}' is not an event; use execute (or tool) or search",
                        cut(other)
                    ),
                ));
            }
        };
        let outcome = match text.outcome.as_deref() {
            None => None,
            Some(o) if OUTCOMES.contains(&o) => Some(o.to_string()),
            Some(o) => {
                return Err(refuse(
                    "outcome",
                    format!(
                        "'{}' is not an outcome; one of {}",
                        cut(o),
                        OUTCOMES.join(", ")
                    ),
                ));
            }
        };
        let since = text
            .since
            .as_deref()
            .map(|t| time("since", t, now))
            .transpose()?;
        let until = text
            .until
            .as_deref()
            .map(|t| time("until", t, now))
            .transpose()?;
        if let (Some(s), Some(u)) = (since, until)
            && u < s
        {
            return Err(refuse(
                "until",
                format!("{} is before since ({})", stamp(u), stamp(s)),
            ));
        }
        Ok(Self {
            event,
            user: bounded("user", &text.user)?,
            tool: bounded("tool", &text.tool)?,
            outcome,
            query: bounded("query", &text.query)?.map(|q| q.to_lowercase()),
            since,
            until,
        })
    }

    /// Whether `event` passes.
    pub fn matches(&self, event: &AuditEvent) -> bool {
        let same = |want: &Option<String>, got: Option<&str>| {
            want.as_deref().is_none_or(|w| got == Some(w))
        };
        if !(same(&self.event, Some(&event.event))
            && same(&self.user, Some(&event.user))
            && same(&self.tool, event.tool.as_deref())
            && same(&self.outcome, Some(&event.outcome)))
        {
            return false;
        }
        if let Some(q) = &self.query
            && !event
                .query
                .as_deref()
                .is_some_and(|text| text.to_lowercase().contains(q.as_str()))
        {
            return false;
        }
        if self.since.is_none() && self.until.is_none() {
            return true;
        }
        // An event whose time does not read passes no time filter.
        let Ok(at) = DateTime::parse_from_rfc3339(&event.time).map(|t| t.to_utc()) else {
            return false;
        };
        self.since.is_none_or(|s| at >= s) && self.until.is_none_or(|u| at <= u)
    }
}

/// Filter text: not empty, at most [`MAX_FILTER_BYTES`].
fn bounded(param: &'static str, value: &Option<String>) -> Result<Option<String>, FilterError> {
    match value {
        None => Ok(None),
        Some(v) if v.is_empty() => Err(refuse(param, "is empty; leave it out to match all")),
        Some(v) if v.len() > MAX_FILTER_BYTES => Err(refuse(
            param,
            format!("is {} bytes long; at most {MAX_FILTER_BYTES}", v.len()),
        )),
        Some(v) => Ok(Some(v.clone())),
    }
}

/// A caller's text in an error, cut and without control characters.
fn cut(text: &str) -> String {
    let text: String = text.chars().take(64).collect();
    text.escape_debug().to_string()
}

fn stamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// A point in time: RFC 3339 (`2026-12-01T10:00:00Z`), a UTC date (`2026-12-01`, its
/// midnight) or an age before `now` (`90s`, `30m`, `12h`, `7d`).
pub fn time(
    param: &'static str,
    text: &str,
    now: DateTime<Utc>,
) -> Result<DateTime<Utc>, FilterError> {
    let text = text.trim();
    if let Ok(t) = DateTime::parse_from_rfc3339(text) {
        return Ok(t.to_utc());
    }
    if let Ok(d) = NaiveDate::parse_from_str(text, "%Y-%m-%d") {
        return Ok(d.and_hms_opt(0, 0, 0).unwrap_or_default().and_utc());
    }
    let unit_at = text.len().saturating_sub(1);
    if let (Some(n), Some(unit)) = (
        text.get(..unit_at).and_then(|n| n.parse::<i64>().ok()),
        text.get(unit_at..),
    ) && n >= 0
    {
        let secs = match unit {
            "s" => Some(n),
            "m" => n.checked_mul(60),
            "h" => n.checked_mul(3600),
            "d" => n.checked_mul(86_400),
            _ => None,
        };
        if let Some(secs) = secs {
            if secs > MAX_AGE_DAYS * 86_400 {
                return Err(refuse(
                    param,
                    format!("'{}' is older than {MAX_AGE_DAYS}d", cut(text)),
                ));
            }
            return Ok(now - chrono::Duration::seconds(secs));
        }
    }
    Err(refuse(
        param,
        format!(
            "'{}' is not a time; give RFC 3339 (2026-12-01T10:00:00Z), a UTC date (2026-12-01) \
             or an age (90s, 30m, 12h, 7d)",
            cut(text)
        ),
    ))
}

/// Where a page starts: the id of the last entry the previous page read (that entry
/// excluded), as `next` gave it.
pub fn cursor(text: &str) -> Result<String, FilterError> {
    let ok = text.len() <= 41
        && text.split_once('-').is_some_and(|(ms, seq)| {
            !ms.is_empty()
                && !seq.is_empty()
                && ms.bytes().all(|b| b.is_ascii_digit())
                && seq.bytes().all(|b| b.is_ascii_digit())
        });
    if ok {
        Ok(text.to_string())
    } else {
        Err(refuse(
            "cursor",
            format!(
                "'{}' is not a cursor (give back the `next` of a page)",
                cut(text)
            ),
        ))
    }
}

/// One page of events, newest first.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Page {
    pub events: Vec<AuditEvent>,
    /// Where the next page starts; `None`: the scan reached the end (or `since`).
    pub next: Option<String>,
    /// Entries read that are not events (another writer's, or unreadable).
    pub unreadable: usize,
}

/// Reading the audit stream failed.
#[derive(Debug, thiserror::Error)]
#[error("reading the audit stream '{key}': {source}")]
pub struct ReadError {
    key: String,
    source: redis::RedisError,
}

/// The audit stream of `audit.stream`, over the gateway's Redis connection.
#[derive(Clone)]
pub struct Stream {
    key: String,
    conn: Conn,
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stream").field("key", &self.key).finish()
    }
}

impl Stream {
    pub fn new(key: impl Into<String>, conn: Conn) -> Self {
        Self {
            key: key.into(),
            conn,
        }
    }

    pub fn key(&self) -> &str {
        &self.key
    }

    /// Up to `limit` (at most [`MAX_PAGE`]) events passing `filter`, newest first,
    /// before `cursor` (from the newest without one).
    pub async fn page(
        &self,
        filter: &Filter,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<Page, ReadError> {
        let limit = limit.clamp(1, MAX_PAGE);
        let start = filter.since.map_or_else(
            || "-".to_string(),
            |s| format!("{}-0", s.timestamp_millis().max(0)),
        );
        let mut end = cursor.map_or_else(|| "+".to_string(), |c| format!("({c}"));
        let mut page = Page::default();
        let (mut scanned, mut bytes) = (0, 0);
        loop {
            let count = CHUNK.min(MAX_SCAN - scanned);
            let entries: Vec<(String, Vec<(String, String)>)> = redis::cmd("XREVRANGE")
                .arg(&self.key)
                .arg(&end)
                .arg(&start)
                .arg("COUNT")
                .arg(count)
                .query_async(&mut self.conn.clone())
                .await
                .map_err(|source| ReadError {
                    key: self.key.clone(),
                    source,
                })?;
            let exhausted = entries.len() < count;
            for (id, fields) in entries {
                scanned += 1;
                end = format!("({id}");
                let event = fields
                    .iter()
                    .find(|(name, _)| name == STREAM_FIELD)
                    .and_then(|(_, json)| {
                        serde_json::from_str::<AuditEvent>(json)
                            .ok()
                            .map(|e| (e, json.len()))
                    });
                match event {
                    Some((e, len)) if filter.matches(&e) => {
                        page.events.push(e);
                        bytes += len;
                    }
                    Some(_) => {}
                    None => page.unreadable += 1,
                }
                if page.events.len() >= limit || bytes >= MAX_PAGE_BYTES || scanned >= MAX_SCAN {
                    page.next = Some(id);
                    return Ok(page);
                }
            }
            if exhausted {
                return Ok(page);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-12-07T12:00:00Z")
            .unwrap()
            .to_utc()
    }

    fn text(f: impl FnOnce(&mut FilterText)) -> FilterText {
        let mut t = FilterText::default();
        f(&mut t);
        t
    }

    #[test]
    fn times_are_rfc3339_dates_or_ages() {
        let at = |s: &str| time("since", s, now()).unwrap();
        assert_eq!(at("2026-12-01T10:00:00+01:00"), at("2026-12-01T09:00:00Z"));
        assert_eq!(at("2026-12-01"), at("2026-12-01T00:00:00Z"));
        assert_eq!(at("30m"), at("2026-12-07T11:30:00Z"));
        assert_eq!(at("7d"), at("2026-11-30T12:00:00Z"));
        for bad in [
            "yesterday",
            "2026-13-01",
            "-5m",
            "5w",
            "",
            "99999999999999999d",
        ] {
            let e = time("since", bad, now()).unwrap_err();
            assert_eq!(e.param, "since", "{bad}");
        }
    }

    #[test]
    fn bad_filters_name_their_parameter() {
        let err = |t: FilterText| Filter::parse(&t, now()).unwrap_err();
        assert_eq!(
            err(text(|t| t.outcome = Some("sucess".into()))).param,
            "outcome"
        );
        assert_eq!(err(text(|t| t.event = Some("exec".into()))).param, "event");
        assert_eq!(err(text(|t| t.user = Some(String::new()))).param, "user");
        assert_eq!(err(text(|t| t.tool = Some("x".repeat(600)))).param, "tool");
        let e = err(text(|t| {
            t.since = Some("1h".into());
            t.until = Some("2h".into());
        }));
        assert_eq!(e.param, "until");
        assert!(e.reason.contains("before since"), "{e}");
        // A caller's control characters never reach an error text raw.
        let e = err(text(|t| t.outcome = Some("\u{1b}[2J".into())));
        assert!(!e.reason.contains('\u{1b}'), "{e}");
        assert_eq!(cursor("1733530000000-0").unwrap(), "1733530000000-0");
        assert_eq!(cursor("+").unwrap_err().param, "cursor");
    }

    #[test]
    fn a_filter_matches_every_field_it_sets() {
        let caller = crate::auth::Identity::anonymous();
        let mut e = AuditEvent::new("search", &caller);
        e.time = "2026-12-07T11:00:00.000Z".into();
        e.query = Some("Echo A Message".into());
        e.outcome = "success".into();
        let f = |t: FilterText| Filter::parse(&t, now()).unwrap();
        assert!(f(FilterText::default()).matches(&e));
        assert!(f(text(|t| t.query = Some("echo a".into()))).matches(&e));
        assert!(f(text(|t| t.event = Some("search".into()))).matches(&e));
        assert!(!f(text(|t| t.event = Some("tool".into()))).matches(&e));
        assert!(!f(text(|t| t.tool = Some("public.echo".into()))).matches(&e));
        assert!(f(text(|t| t.since = Some("2h".into()))).matches(&e));
        assert!(!f(text(|t| t.since = Some("30m".into()))).matches(&e));
        assert!(!f(text(|t| t.until = Some("2h".into()))).matches(&e));
        assert!(!f(text(|t| t.outcome = Some("error".into()))).matches(&e));
    }
}
