//! How an error and its causes are shown to a person, in one line: the binaries' `main`
//! (gateway, operator, executor, CLI) and any message that quotes a library's error
//! (hyper's top-level message alone says little) render it here.
//!
//! Not here: what an error says (each error type's own `Display`), or where it goes
//! (stderr, a log field, a status condition).

use std::error::Error;

/// `error: cause: cause …`, each text once: most of our errors already name their cause
/// in their own message (`{source}` in a `thiserror` message, or anyhow's `context`), so a
/// cause whose text is already shown is skipped. For an [`anyhow::Error`] `e`, pass
/// `e.as_ref()`.
///
/// ```
/// use std::io;
/// #[derive(Debug, thiserror::Error)]
/// #[error("reading settings.yaml: {0}")]
/// struct Read(#[source] io::Error);
/// let e = Read(io::Error::other("permission denied"));
/// assert_eq!(mcc_catalog::error_chain::render(&e), "reading settings.yaml: permission denied");
/// ```
///
/// [`anyhow::Error`]: https://docs.rs/anyhow/latest/anyhow/struct.Error.html
pub fn render(error: &dyn Error) -> String {
    let mut out = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = cause.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("{text}")]
    struct Layer {
        text: &'static str,
        #[source]
        source: Option<Box<Layer>>,
    }

    fn chain(texts: &[&'static str]) -> Layer {
        let mut layer: Option<Box<Layer>> = None;
        for text in texts.iter().rev() {
            layer = Some(Box::new(Layer {
                text,
                source: layer,
            }));
        }
        *layer.unwrap()
    }

    #[test]
    fn each_cause_is_shown_once_in_order() {
        assert_eq!(render(&chain(&["top"])), "top");
        assert_eq!(
            render(&chain(&["loading x.yaml", "line 3: bad", "io"])),
            "loading x.yaml: line 3: bad: io"
        );
        // A cause already named by the message above it is not repeated.
        assert_eq!(
            render(&chain(&[
                "loading x.yaml: line 3: bad",
                "line 3: bad",
                "io"
            ])),
            "loading x.yaml: line 3: bad: io"
        );
    }
}
