//! How limit hits read, as MCC words them: `resource limit hit: <reason> [limits: {...}]`
//! before stderr, `timeout after Ns` for a timeout. The limits themselves (rlimits,
//! timeout) are applied by [`mcc_executor::limits`].

use mcc_catalog::Limits;

pub use mcc_executor::limits::{LimitError, Rlimits, timeout};

/// A number as Python's `str()` prints it: `1` for a whole number, `0.5` otherwise.
pub fn py_number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e16 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// `timeout after Ns`, the stderr of a timed-out call.
pub fn timeout_message(timeout: Option<std::time::Duration>) -> String {
    let n = timeout
        .map(|t| py_number(t.as_secs_f64()))
        .unwrap_or_default();
    format!("timeout after {n}s")
}

/// The declared limits as MCC prints them: a Python dict repr, e.g. `{'cpu_sec': 1}`.
pub fn py_repr(limits: &Limits) -> String {
    let fields = [
        ("timeout", limits.timeout.map(py_number)),
        ("mem_mb", limits.mem_mb.map(|v| v.to_string())),
        ("cpu_sec", limits.cpu_sec.map(|v| v.to_string())),
        ("fsize_mb", limits.fsize_mb.map(|v| v.to_string())),
        ("nofile", limits.nofile.map(|v| v.to_string())),
    ];
    let items: Vec<String> = fields
        .iter()
        .filter_map(|(name, v)| v.as_ref().map(|v| format!("'{name}': {v}")))
        .collect();
    format!("{{{}}}", items.join(", "))
}

/// Why a process with limits died of `signal`.
pub fn signal_reason(signal: i32) -> String {
    match signal {
        libc::SIGXCPU => "cpu time exceeded (SIGXCPU)".into(),
        libc::SIGXFSZ => "file size exceeded (SIGXFSZ)".into(),
        libc::SIGKILL => "killed (SIGKILL)".into(),
        n => format!("signal {n}"),
    }
}

/// The line put before the stderr of a tool with limits that a signal killed.
pub fn hit_prefix(signal: i32, limits: &Limits) -> String {
    format!(
        "resource limit hit: {} [limits: {}]\n",
        signal_reason(signal),
        py_repr(limits)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_print_like_python() {
        assert_eq!(py_number(1.0), "1");
        assert_eq!(py_number(0.5), "0.5");
        assert_eq!(py_number(30.0), "30");
    }

    #[test]
    fn limits_repr_is_a_python_dict_in_field_order() {
        let limits = Limits {
            timeout: Some(10.0),
            cpu_sec: Some(1),
            ..Limits::default()
        };
        assert_eq!(py_repr(&limits), "{'timeout': 10, 'cpu_sec': 1}");
        assert_eq!(py_repr(&Limits::default()), "{}");
        assert_eq!(
            hit_prefix(libc::SIGXCPU, &limits),
            "resource limit hit: cpu time exceeded (SIGXCPU) [limits: {'timeout': 10, 'cpu_sec': 1}]\n"
        );
        assert_eq!(signal_reason(15), "signal 15");
    }
}
