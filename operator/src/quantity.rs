//! Kubernetes quantities (`500m`, `2`, `1.5Gi`, `1e3`, `128974848`) as numbers, for the
//! settings and policies that compare them: the byte budgets, the pod resources a
//! namespace may ask for. One parser for both, and for every suffix the API accepts.

/// The value of `text` in base units (cores, bytes), or `None` when it is not a
/// non-negative quantity.
pub fn parse(text: &str) -> Option<f64> {
    let text = text.trim();
    let end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(end);
    if number.is_empty() || number == "." || number.matches('.').count() > 1 {
        return None;
    }
    let value: f64 = number.parse().ok()?;
    let scale = match suffix {
        "" => 1.0,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024f64,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        exp if exp.starts_with(['e', 'E']) => 10f64.powi(exp[1..].parse::<i32>().ok()?),
        _ => return None,
    };
    Some(value * scale).filter(|v| v.is_finite())
}

/// A quantity of a JSON value: a string, or a number as the API server also accepts.
pub fn parse_json(value: &serde_json::Value) -> Option<f64> {
    match value {
        serde_json::Value::String(s) => parse(s),
        serde_json::Value::Number(n) => n.as_f64().filter(|v| *v >= 0.0),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_suffix_and_form() {
        for (text, want) in [
            ("500m", 0.5),
            ("2", 2.0),
            ("1.5", 1.5),
            ("1Gi", 1073741824.0),
            ("128Mi", 134217728.0),
            ("1G", 1e9),
            ("64k", 64000.0),
            ("1e3", 1000.0),
            ("2E2", 200.0),
        ] {
            assert_eq!(parse(text), Some(want), "{text}");
        }
        for bad in ["", "-1", "1GB", "Mi", "1..2", "x", "1e", "."] {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }
}
