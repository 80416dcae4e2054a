//! The one definition of a rate limit as written in tool files, `Tool` resources and the
//! gateway's settings: `<count>/<n><unit>` (`10/1min`, `100/1h`, `5/30s`) or unlimited.
//! Counting calls is the gateway's job; this module only parses, prints and compares.
//!
//! Accepted spellings (MCC's included):
//! - units `s` (`sec`, `second(s)`), `min` (`m`, `minute(s)`), `h` (`hr`, `hour(s)`),
//!   `d` (`day(s)`); `n` may be left out (`10/min` is `10/1min`);
//! - unlimited: `unlimited`, `none`, `-1` (MCC's), as text or as the number `-1`.
//!
//! ```
//! use mcc_catalog::rate::RateLimit;
//! let limit: RateLimit = "60/1hr".parse().unwrap();
//! assert_eq!(limit.to_string(), "60/1h");
//! assert_eq!("-1".parse::<RateLimit>().unwrap(), RateLimit::Unlimited);
//! ```

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How many calls a window admits, or no limit at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RateLimit {
    /// No limit (also overrides a less specific limit: a tool's `unlimited` wins over
    /// its callers' group and the global limit).
    Unlimited,
    /// At most `count` calls in each window of `window`.
    Every { count: u32, window: Duration },
}

/// Why a rate limit does not parse; the text names the accepted forms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "'{text}' is not a rate limit: {reason} (write <count>/<n><s|min|h>, e.g. 10/1min or 100/1h, or unlimited / -1)"
)]
pub struct RateLimitError {
    pub text: String,
    pub reason: String,
}

impl RateLimit {
    /// `count` calls per `window`; `None` when either is zero.
    pub fn every(count: u32, window: Duration) -> Option<Self> {
        (count > 0 && !window.is_zero()).then_some(RateLimit::Every { count, window })
    }

    pub fn is_unlimited(&self) -> bool {
        matches!(self, RateLimit::Unlimited)
    }

    /// Whether `self` admits fewer calls over time than `other` (at an equal rate, the
    /// shorter window is the stricter: it allows smaller bursts). Unlimited is never
    /// stricter than anything.
    pub fn is_stricter_than(&self, other: &RateLimit) -> bool {
        match (self, other) {
            (RateLimit::Unlimited, _) => false,
            (RateLimit::Every { .. }, RateLimit::Unlimited) => true,
            (
                RateLimit::Every {
                    count: c1,
                    window: w1,
                },
                RateLimit::Every {
                    count: c2,
                    window: w2,
                },
            ) => {
                // c1/w1 < c2/w2  <=>  c1*w2 < c2*w1
                let left = u128::from(*c1) * w2.as_millis();
                let right = u128::from(*c2) * w1.as_millis();
                left < right || (left == right && w1 < w2)
            }
        }
    }

    /// The stricter of the limits given (`None` when there are none).
    pub fn strictest<'a>(limits: impl IntoIterator<Item = &'a RateLimit>) -> Option<RateLimit> {
        limits.into_iter().fold(None, |best, l| match best {
            Some(b) if !l.is_stricter_than(&b) => Some(b),
            _ => Some(*l),
        })
    }
}

const UNITS: &[(&[&str], u64)] = &[
    (&["s", "sec", "secs", "second", "seconds"], 1),
    (&["min", "mins", "m", "minute", "minutes"], 60),
    (&["h", "hr", "hrs", "hour", "hours"], 3600),
    (&["d", "day", "days"], 86_400),
];

impl FromStr for RateLimit {
    type Err = RateLimitError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let err = |reason: &str| RateLimitError {
            text: text.to_string(),
            reason: reason.to_string(),
        };
        let t = text.trim();
        if matches!(t.to_ascii_lowercase().as_str(), "-1" | "unlimited" | "none") {
            return Ok(RateLimit::Unlimited);
        }
        let (count, per) = t.split_once('/').ok_or_else(|| err("no '/'"))?;
        let count: u32 = count
            .trim()
            .parse()
            .map_err(|_| err("the count is not a whole number"))?;
        if count == 0 {
            return Err(err(
                "the count must be at least 1 (to refuse every call, take the tool's group away)",
            ));
        }
        let per = per.trim();
        let digits = per.find(|c: char| !c.is_ascii_digit()).unwrap_or(per.len());
        let (n, unit) = per.split_at(digits);
        let n: u64 = if n.is_empty() {
            1
        } else {
            n.parse()
                .map_err(|_| err("the window length is too large"))?
        };
        let unit = unit.trim().to_ascii_lowercase();
        let secs = UNITS
            .iter()
            .find(|(names, _)| names.contains(&unit.as_str()))
            .map(|(_, secs)| *secs)
            .ok_or_else(|| err("the unit is not one of s, min, h (or sec, m, hr, d)"))?;
        if n == 0 {
            return Err(err("the window must be longer than 0"));
        }
        let window = n
            .checked_mul(secs)
            .filter(|s| *s <= 366 * 86_400)
            .ok_or_else(|| err("the window is longer than a year"))?;
        Ok(RateLimit::Every {
            count,
            window: Duration::from_secs(window),
        })
    }
}

impl fmt::Display for RateLimit {
    /// The canonical form: `unlimited`, or `<count>/<n><unit>` with the largest of `h`,
    /// `min`, `s` that divides the window.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RateLimit::Unlimited => f.write_str("unlimited"),
            RateLimit::Every { count, window } => {
                let secs = window.as_secs();
                let (n, unit) = [(3600, "h"), (60, "min")]
                    .into_iter()
                    .find(|(u, _)| secs % u == 0)
                    .map_or((secs, "s"), |(u, name)| (secs / u, name));
                write!(f, "{count}/{n}{unit}")
            }
        }
    }
}

impl Serialize for RateLimit {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for RateLimit {
    /// Text in any accepted spelling, or the number `-1` (MCC's unlimited).
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match serde_json::Value::deserialize(d)? {
            serde_json::Value::String(s) => s.parse().map_err(serde::de::Error::custom),
            serde_json::Value::Number(n) if n.as_i64() == Some(-1) => Ok(RateLimit::Unlimited),
            other => Err(serde::de::Error::custom(RateLimitError {
                text: other.to_string(),
                reason: "expected text".into(),
            })),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every(count: u32, secs: u64) -> RateLimit {
        RateLimit::every(count, Duration::from_secs(secs)).unwrap()
    }

    #[test]
    fn parses_ours_and_mccs_spellings() {
        for (text, want) in [
            ("10/1min", every(10, 60)),
            ("100/1h", every(100, 3600)),
            ("60/1hr", every(60, 3600)),
            ("5/30s", every(5, 30)),
            (" 3 / 2 min ", every(3, 120)),
            ("10/min", every(10, 60)),
            ("7/1d", every(7, 86_400)),
            ("2/10sec", every(2, 10)),
            ("4/1HR", every(4, 3600)),
            ("-1", RateLimit::Unlimited),
            ("unlimited", RateLimit::Unlimited),
            ("None", RateLimit::Unlimited),
        ] {
            assert_eq!(text.parse::<RateLimit>().unwrap(), want, "{text}");
        }
    }

    #[test]
    fn refuses_what_is_not_a_limit_with_the_accepted_forms() {
        for bad in [
            "10", "0/1min", "x/1min", "10/1", "10/1w", "10/0s", "10/400d", "", "-2",
        ] {
            let e = bad.parse::<RateLimit>().unwrap_err().to_string();
            assert!(e.contains("10/1min") && e.contains(bad), "{e}");
        }
    }

    #[test]
    fn prints_the_canonical_form_and_round_trips() {
        for (text, shown) in [
            ("10/1min", "10/1min"),
            ("60/1hr", "60/1h"),
            ("5/90s", "5/90s"),
            ("5/120s", "5/2min"),
            ("1/1d", "1/24h"),
            ("-1", "unlimited"),
        ] {
            let limit: RateLimit = text.parse().unwrap();
            assert_eq!(limit.to_string(), shown);
            assert_eq!(shown.parse::<RateLimit>().unwrap(), limit);
        }
        let json = serde_json::to_value(every(10, 60)).unwrap();
        assert_eq!(json, serde_json::json!("10/1min"));
        let back: RateLimit = serde_json::from_value(json).unwrap();
        assert_eq!(back, every(10, 60));
        let minus: RateLimit = serde_json::from_value(serde_json::json!(-1)).unwrap();
        assert_eq!(minus, RateLimit::Unlimited);
        assert!(serde_json::from_value::<RateLimit>(serde_json::json!(5)).is_err());
    }

    #[test]
    fn the_strictest_admits_the_fewest_calls() {
        let a = every(10, 60); // 10/min
        let b = every(100, 3600); // ~1.7/min
        let c = every(1, 6); // 10/min, smaller bursts
        assert!(b.is_stricter_than(&a));
        assert!(!a.is_stricter_than(&b));
        assert!(c.is_stricter_than(&a), "equal rate: the shorter window");
        assert!(a.is_stricter_than(&RateLimit::Unlimited));
        assert!(!RateLimit::Unlimited.is_stricter_than(&a));
        assert_eq!(
            RateLimit::strictest([&a, &b, &RateLimit::Unlimited]),
            Some(b)
        );
        assert_eq!(
            RateLimit::strictest([&RateLimit::Unlimited]),
            Some(RateLimit::Unlimited)
        );
        assert_eq!(RateLimit::strictest([]), None);
    }
}
