//! The representations of `GET /v1/tools`: which one a request wants (MCC's `?format=`
//! first, else `Accept`, else JSON) and the Markdown and HTML renderings of the caller's
//! tools (MCC's signature blocks, which are Markdown already).

use axum::http::HeaderMap;
use mcc_catalog::Tool;
use mcc_catalog::approval::Policy;

use super::error::ApiError;
use crate::calls::text::signature;

/// A representation of the tool list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Json,
    Markdown,
    Html,
}

impl Format {
    /// `format` (`json`, `md`, `markdown`, `html`) if given, else the first of
    /// `text/markdown`, `text/html` or a JSON type the `Accept` header lists, else JSON.
    pub fn negotiate(format: Option<&str>, headers: &HeaderMap) -> Result<Self, ApiError> {
        if let Some(name) = format {
            return match name.to_ascii_lowercase().as_str() {
                "json" => Ok(Format::Json),
                "md" | "markdown" => Ok(Format::Markdown),
                "html" => Ok(Format::Html),
                other => Err(ApiError::NotAcceptable(format!(
                    "format '{other}' is not one of json, md, html"
                ))),
            };
        }
        let accept = headers
            .get_all(axum::http::header::ACCEPT)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(|t| {
                t.split(';')
                    .next()
                    .unwrap_or("")
                    .trim()
                    .to_ascii_lowercase()
            });
        for media in accept {
            match media.as_str() {
                "text/markdown" => return Ok(Format::Markdown),
                "text/html" => return Ok(Format::Html),
                "application/json" => return Ok(Format::Json),
                _ => {}
            }
        }
        Ok(Format::Json)
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Format::Json => "application/json",
            Format::Markdown => "text/markdown; charset=utf-8",
            Format::Html => "text/html; charset=utf-8",
        }
    }
}

/// `# Tools` and each tool's signature block, a blank line apart.
pub fn markdown(tools: &[&Tool], policy: &Policy) -> String {
    let mut out = String::from("# Tools\n");
    if tools.is_empty() {
        out.push('\n');
        out.push_str(crate::calls::text::NO_TOOLS);
        out.push('\n');
    }
    for tool in tools {
        out.push('\n');
        out.push_str(&signature(tool, policy));
    }
    out
}

/// A small self-contained page: each tool's key as a heading and its signature block.
pub fn html(tools: &[&Tool], policy: &Policy) -> String {
    let mut out = String::from(
        "<!doctype html>\n<html lang=\"en\">\n<head><meta charset=\"utf-8\"><title>MCC tools</title></head>\n<body>\n<h1>Tools</h1>\n",
    );
    if tools.is_empty() {
        out.push_str(&format!(
            "<p>{}</p>\n",
            escape(crate::calls::text::NO_TOOLS)
        ));
    }
    for tool in tools {
        out.push_str(&format!(
            "<section id=\"{key}\">\n<h2><code>{key}</code></h2>\n<pre>{}</pre>\n</section>\n",
            escape(&signature(tool, policy)),
            key = escape(&tool.key),
        ));
    }
    out.push_str("</body>\n</html>\n");
    out
}

/// Text safe in HTML content and attribute values.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn headers(accept: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(axum::http::header::ACCEPT, accept.parse().unwrap());
        h
    }

    #[test]
    fn format_wins_over_accept_and_json_is_the_default() {
        let none = HeaderMap::new();
        assert_eq!(Format::negotiate(None, &none).unwrap(), Format::Json);
        let md = headers("text/markdown");
        assert_eq!(Format::negotiate(None, &md).unwrap(), Format::Markdown);
        let browser = headers("text/html,application/xhtml+xml,*/*;q=0.8");
        assert_eq!(Format::negotiate(None, &browser).unwrap(), Format::Html);
        assert_eq!(Format::negotiate(Some("json"), &md).unwrap(), Format::Json);
        assert_eq!(
            Format::negotiate(Some("MD"), &none).unwrap(),
            Format::Markdown
        );
        let err = Format::negotiate(Some("yaml"), &none).unwrap_err();
        assert!(err.to_string().contains("'yaml'"), "{err}");
    }

    #[test]
    fn html_escapes_what_tools_say() {
        let tool: Tool = serde_json::from_value(json!({
            "key": "public.x", "name": "x", "kind": "exec", "command": "true",
            "description": "<script>alert('x')</script> & more"
        }))
        .unwrap();
        let page = html(&[&tool], &Policy::default());
        assert!(!page.contains("<script>"), "{page}");
        assert!(page.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; more"));
        assert!(
            markdown(&[&tool], &Policy::default()).starts_with("# Tools\n\n## public.x () -> ")
        );
    }
}
