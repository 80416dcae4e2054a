//! A running gateway over MCP (streamable HTTP, rmcp's client): `describe_tools` lists,
//! `search` describes one tool, `execute` runs, `new_session`/`set_session`/
//! `get_session` handle session variables. The gateway authenticates the credential and
//! applies RBAC; this module never decides who may do what.

use anyhow::{Context, anyhow, bail};
use rmcp::model::{CallToolRequestParams, CallToolResult, ProtocolVersion};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientLifecycleMode, ClientServiceExt};
use serde_json::{Map, Value, json};

use crate::source::Source;

/// A connected MCP client of one gateway.
pub struct Remote {
    client: RunningService<RoleClient, ()>,
    url: String,
}

/// One tool as the gateway describes it.
pub struct Described {
    pub key: String,
    pub description: String,
}

/// The texts the gateway answers with instead of a result (MCC's notices).
fn notice_is_error(text: &str) -> bool {
    use mcc_gateway::calls::text;
    text.starts_with("Unknown tool: ")
        || text == text::UNAUTHORIZED
        || text == text::CANCELLED
        || text.starts_with("Validation error for tool '")
}

impl Remote {
    /// Connects as a stateless (2026-07-28) client, so session variables live in the
    /// caller's own buckets across invocations. `--as` is refused: the gateway acts as
    /// the credential's user, and asking for another would be impersonation.
    pub async fn connect(source: &Source) -> anyhow::Result<Self> {
        let url = endpoint(source.url.as_deref().expect("remote only with --url"))?;
        if let Some(user) = &source.as_user {
            bail!(
                "--as {user} cannot be used with --url: against a gateway it would be \
                 impersonation; the gateway acts as the user of --token (MCC_TOKEN). \
                 Use --as with local tool files (--tools)"
            );
        }
        for (flag, given) in [
            ("--tools", !source.tools.is_empty()),
            ("--users", source.users.is_some()),
            ("--config", source.config.is_some()),
        ] {
            if given {
                bail!(
                    "{flag} is for local tool files and cannot be used with --url {url} \
                     (or MCC_URL)"
                );
            }
        }
        mcc_gateway::tls::install_crypto_provider();
        let mut config = StreamableHttpClientTransportConfig::with_uri(url.clone());
        if let Some(token) = &source.token {
            config = config.auth_header(token.clone());
        }
        let transport = StreamableHttpClientTransport::from_config(config);
        let client = ()
            .serve_with_lifecycle(
                transport,
                ClientLifecycleMode::Discover {
                    preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                },
            )
            .await
            .map_err(|e| connect_error(&url, source.token.is_some(), &e))?;
        Ok(Self { client, url })
    }

    async fn call_tool(&self, name: &str, args: Value) -> anyhow::Result<CallToolResult> {
        let Value::Object(args) = args else {
            unreachable!("tool arguments are objects")
        };
        self.client
            .call_tool(CallToolRequestParams::new(name.to_string()).with_arguments(args))
            .await
            .with_context(|| format!("{}: {name} failed", self.url))
    }

    async fn call_text(&self, name: &str, args: Value) -> anyhow::Result<String> {
        let result = self.call_tool(name, args).await?;
        let text = text_of(&result);
        if result.is_error == Some(true) {
            bail!("{}: {name}: {text}", self.url);
        }
        Ok(text)
    }

    /// The tools the credential's user may run (`describe_tools`), sorted by key.
    pub async fn tools(&self) -> anyhow::Result<Vec<Described>> {
        let text = self.call_text("describe_tools", json!({})).await?;
        let mut out = parse_described(&text);
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }

    /// One tool's signature block (from `search`, which returns signatures).
    pub async fn signature(&self, key: &str) -> anyhow::Result<String> {
        let text = self.call_text("search", json!({"query": key})).await?;
        find_signature(&text, key).ok_or_else(|| {
            anyhow!(
                "tool '{key}': unknown at {}, or its user may not run it",
                self.url
            )
        })
    }

    /// Runs a tool; `Ok(Err(text))` is a notice (unknown tool, unauthorized, invalid
    /// params) or an error result.
    pub async fn execute(
        &self,
        key: &str,
        params: Map<String, Value>,
        session: Option<&str>,
    ) -> anyhow::Result<Result<CallToolResult, String>> {
        let mut args = json!({"key": key, "params": params});
        if let Some(s) = session {
            args["session"] = json!(s);
        }
        let result = self.call_tool("execute", args).await?;
        let text = text_of(&result);
        if result.is_error == Some(true) || notice_is_error(&text) {
            return Ok(Err(text));
        }
        Ok(Ok(result))
    }

    pub async fn new_session(&self) -> anyhow::Result<String> {
        self.call_text("new_session", json!({})).await
    }

    pub async fn set_var(
        &self,
        session: Option<&str>,
        name: &str,
        value: Value,
    ) -> anyhow::Result<()> {
        let mut args = json!({"name": name, "value": value});
        if let Some(s) = session {
            args["session"] = json!(s);
        }
        let text = self.call_text("set_session", args).await?;
        if text != mcc_catalog::context::set_confirmation(name) {
            bail!("session variable '{name}': {text}");
        }
        Ok(())
    }

    pub async fn get_var(&self, session: Option<&str>, name: &str) -> anyhow::Result<Value> {
        let mut args = json!({"name": name});
        if let Some(s) = session {
            args["session"] = json!(s);
        }
        let text = self.call_text("get_session", args).await?;
        serde_json::from_str(&text).map_err(|_| anyhow!("session variable '{name}': {text}"))
    }

    pub async fn close(self) {
        let _ = self.client.cancel().await;
    }
}

/// The MCP endpoint of `--url`: an http(s) URL; a bare `https://host[:port]` means its
/// `/mcp`, where the gateway serves MCP.
pub fn endpoint(url: &str) -> anyhow::Result<String> {
    let Some(rest) = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
    else {
        bail!("--url {url}: expected an http:// or https:// URL (the gateway's /mcp endpoint)");
    };
    if rest.is_empty() || rest.starts_with('/') {
        bail!("--url {url}: no host");
    }
    Ok(match rest.find('/') {
        None => format!("{url}/mcp"),
        Some(i) if &rest[i..] == "/" => format!("{}mcp", url),
        Some(_) => url.to_string(),
    })
}

/// Why the first request failed, in words that name the flag to fix.
fn connect_error(
    url: &str,
    has_token: bool,
    e: &(impl std::fmt::Display + std::fmt::Debug),
) -> anyhow::Error {
    let text = format!("{e} {e:?}");
    if text.contains("Auth required") || text.contains("AuthRequired") {
        return if has_token {
            anyhow!(
                "--token: the gateway at {url} refused the credential (unknown, expired or revoked key, or an invalid token)"
            )
        } else {
            anyhow!("the gateway at {url} requires a credential: pass --token or set MCC_TOKEN")
        };
    }
    if text.contains("error sending request") || text.contains("Connect") {
        return anyhow!(
            "--url {url}: cannot connect to the gateway (is it running, is the URL right?)"
        );
    }
    // rmcp names its transport's full type in the text: leave that out.
    let mut shown = e.to_string();
    while let (Some(a), Some(b)) = (shown.find(" [rmcp::"), shown.find("]>] ")) {
        if b < a {
            break;
        }
        shown.replace_range(a..b + 3, "");
    }
    anyhow!("--url {url}: cannot talk MCP to the gateway: {shown}")
}

/// The text blocks of a result, joined.
pub fn text_of(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("")
}

/// `describe_tools`' `## <key>\n<description>` blocks.
fn parse_described(text: &str) -> Vec<Described> {
    let mut out: Vec<Described> = Vec::new();
    for line in text.lines() {
        if let Some(key) = line.strip_prefix("## ") {
            out.push(Described {
                key: key.trim().to_string(),
                description: String::new(),
            });
        } else if let Some(last) = out.last_mut()
            && (!last.description.is_empty() || !line.is_empty())
        {
            last.description.push_str(line);
            last.description.push('\n');
        }
    }
    for d in &mut out {
        d.description = d.description.trim_end().to_string();
    }
    out
}

/// The block of `search`'s output (`[score]\n## key (…) -> …\n…`) for `key`.
fn find_signature(text: &str, key: &str) -> Option<String> {
    let mut blocks: Vec<Vec<&str>> = Vec::new();
    for line in text.lines() {
        let is_score = line.starts_with('[')
            && line.ends_with(']')
            && line[1..line.len() - 1].parse::<f64>().is_ok();
        if is_score {
            blocks.push(Vec::new());
        } else if let Some(b) = blocks.last_mut() {
            b.push(line);
        }
    }
    let head = format!("## {key} (");
    blocks
        .into_iter()
        .find(|b| {
            b.first()
                .is_some_and(|l| l.starts_with(&head) || *l == format!("## {key}"))
        })
        .map(|b| b.join("\n").trim_end().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_describe_and_search_texts() {
        let d = parse_described("## a.one\nFirst.\nMore.\n\n## b.two\nSecond.");
        assert_eq!(d.len(), 2);
        assert_eq!(
            (d[0].key.as_str(), d[0].description.as_str()),
            ("a.one", "First.\nMore.")
        );
        assert_eq!(d[1].description, "Second.");
        let s = "[3.10]\n## a.one (x:str) -> str\nFirst.\n\n[1.00]\n## a.onex () -> str\nOther.";
        assert_eq!(
            find_signature(s, "a.one").unwrap(),
            "## a.one (x:str) -> str\nFirst."
        );
        assert_eq!(find_signature(s, "a.on"), None);
        assert_eq!(
            endpoint("https://m.example.com").unwrap(),
            "https://m.example.com/mcp"
        );
        assert_eq!(endpoint("http://h:8000/").unwrap(), "http://h:8000/mcp");
        assert_eq!(
            endpoint("http://h:8000/x/mcp").unwrap(),
            "http://h:8000/x/mcp"
        );
        assert!(
            endpoint("h:8000")
                .unwrap_err()
                .to_string()
                .contains("--url h:8000")
        );
        assert!(endpoint("https://").is_err());
    }
}
