//! `mcc mcp install CLIENT`: a gateway's entry in an MCP client's configuration, in the
//! client's documented format, merged into its file (other servers and settings are
//! kept) or printed with `--print`.
//!
//! | client | file (default) | entry |
//! | --- | --- | --- |
//! | claude-desktop | the app's `claude_desktop_config.json` | `mcpServers`: stdio through `npx mcp-remote URL --header …` (the app's file takes stdio servers only) |
//! | claude-code | `.mcp.json` (project scope) | `mcpServers`: `{type: http, url, headers}` (`${VAR}` expanded) |
//! | cursor | `.cursor/mcp.json` | `mcpServers`: `{url, headers}` (`${env:VAR}` expanded) |
//! | vscode | `.vscode/mcp.json` | `servers`: `{type: http, url, headers}`, a `promptString` input for the key when none is given |
//! | gemini-cli | `.gemini/settings.json` | `mcpServers`: `{httpUrl, headers}` (`$VAR` expanded) |
//! | goose | `~/.config/goose/config.yaml` | `extensions`: `{type: streamable_http, uri, headers, …}` |
//! | json (mcp-json) | stdout, or `--file` | `mcpServers`: `{type: http, url, headers}` |

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde_json::{Map, Value, json};

use crate::args::{Client, InstallArgs};
use crate::output::{self, Format};

/// The VS Code input that asks for the key when none is written into the file.
const VSCODE_INPUT: &str = "mcc-api-key";

/// How the credential appears in the file.
enum Credential<'a> {
    None,
    Literal(&'a str),
    /// An environment variable the client expands.
    Env(&'a str),
}

pub fn run(args: InstallArgs, format: Format) -> anyhow::Result<()> {
    let url = crate::remote::endpoint(&args.url)?;
    let args = InstallArgs { url, ..args };
    if args.name.trim().is_empty() {
        bail!("--name: must not be empty");
    }
    let cred = match (&args.token, &args.token_env) {
        (_, Some(var)) => Credential::Env(var),
        (Some(t), None) => Credential::Literal(t),
        (None, None) => Credential::None,
    };
    if matches!(cred, Credential::None) && args.client != Client::Vscode {
        eprintln!(
            "note: no credential (--token, MCC_TOKEN or --token-env): the entry sends none; \
             mint one with `mcc key mint USER`"
        );
    }
    let file = match (&args.file, args.client) {
        (Some(f), _) => Some(f.clone()),
        (None, Client::Json) => None,
        (None, client) => Some(default_file(client)?),
    };
    if args.client == Client::Goose {
        return goose(&args, &cred, file.as_deref(), format);
    }
    let (section, entry) = entry(args.client, &args.url, &cred);
    let print = args.print || file.is_none();
    let existing = match (&file, print) {
        (Some(f), false) => read_json(f)?,
        _ => Value::Object(Map::new()),
    };
    let mut doc = existing;
    let replaced = merge(&mut doc, section, &args.name, entry, file.as_deref())?;
    if args.client == Client::Vscode && matches!(cred, Credential::None) {
        add_vscode_input(&mut doc, file.as_deref())?;
    }
    if print {
        output::json(&doc);
        if args.client == Client::ClaudeCode {
            eprintln!("{}", claude_add_command(&args, &cred));
        }
        return Ok(());
    }
    let file = file.expect("a file unless printing");
    write(&file, &(serde_json::to_string_pretty(&doc)? + "\n"))?;
    report(&file, &args.name, replaced, format);
    Ok(())
}

fn report(file: &Path, name: &str, replaced: bool, format: Format) {
    let verb = if replaced { "replaced" } else { "added" };
    match format {
        Format::Json => output::json(&json!({"file": file, "server": name, "action": verb})),
        Format::Text => println!("{verb} MCP server '{name}' in {}", file.display()),
    }
}

/// The client's documented default location.
fn default_file(client: Client) -> anyhow::Result<PathBuf> {
    let home = || {
        std::env::var_os("HOME")
            .map(PathBuf::from)
            .context("HOME is not set: pass --file")
    };
    Ok(match client {
        Client::ClaudeDesktop => {
            if cfg!(target_os = "macos") {
                home()?.join("Library/Application Support/Claude/claude_desktop_config.json")
            } else if cfg!(windows) {
                PathBuf::from(
                    std::env::var_os("APPDATA").context("APPDATA is not set: pass --file")?,
                )
                .join("Claude/claude_desktop_config.json")
            } else {
                home()?.join(".config/Claude/claude_desktop_config.json")
            }
        }
        Client::ClaudeCode => PathBuf::from(".mcp.json"),
        Client::Cursor => PathBuf::from(".cursor/mcp.json"),
        Client::Vscode => PathBuf::from(".vscode/mcp.json"),
        Client::GeminiCli => PathBuf::from(".gemini/settings.json"),
        Client::Goose => home()?.join(".config/goose/config.yaml"),
        Client::Json => unreachable!("json prints unless --file"),
    })
}

/// The `Authorization` header value in the client's own variable syntax.
fn bearer(client: Client, cred: &Credential) -> Option<String> {
    match cred {
        Credential::None if client == Client::Vscode => {
            Some(format!("Bearer ${{input:{VSCODE_INPUT}}}"))
        }
        Credential::None => None,
        Credential::Literal(t) => Some(format!("Bearer {t}")),
        Credential::Env(var) => Some(match client {
            Client::Cursor | Client::Vscode => format!("Bearer ${{env:{var}}}"),
            _ => format!("Bearer ${{{var}}}"),
        }),
    }
}

/// The top-level key and the server entry of a JSON client.
fn entry(client: Client, url: &str, cred: &Credential) -> (&'static str, Value) {
    let auth = bearer(client, cred);
    let headers = |mut e: Value| {
        if let Some(a) = &auth {
            e["headers"] = json!({"Authorization": a});
        }
        e
    };
    match client {
        Client::ClaudeDesktop => {
            let mut args = vec![json!("-y"), json!("mcp-remote"), json!(url)];
            let local = ["http://127.0.0.1", "http://localhost", "http://[::1]"]
                .iter()
                .any(|p| url.starts_with(p));
            if url.starts_with("http://") && !local {
                args.push(json!("--allow-http"));
            }
            let mut e = json!({"command": "npx", "args": args});
            match cred {
                Credential::None => {}
                Credential::Literal(t) => {
                    // mcp-remote expands ${AUTH_HEADER} from the env Claude Desktop sets.
                    e["args"]
                        .as_array_mut()
                        .unwrap()
                        .extend([json!("--header"), json!("Authorization:${AUTH_HEADER}")]);
                    e["env"] = json!({"AUTH_HEADER": format!("Bearer {t}")});
                }
                Credential::Env(var) => {
                    e["args"].as_array_mut().unwrap().extend([
                        json!("--header"),
                        json!(format!("Authorization:Bearer ${{{var}}}")),
                    ]);
                }
            }
            ("mcpServers", e)
        }
        Client::ClaudeCode | Client::Json => {
            ("mcpServers", headers(json!({"type": "http", "url": url})))
        }
        Client::Cursor => ("mcpServers", headers(json!({"url": url}))),
        Client::Vscode => ("servers", headers(json!({"type": "http", "url": url}))),
        Client::GeminiCli => ("mcpServers", headers(json!({"httpUrl": url}))),
        Client::Goose => unreachable!("goose is YAML"),
    }
}

/// Puts `entry` at `doc[section][name]`; whether it replaced one. Everything else of the
/// document is kept as it was.
fn merge(
    doc: &mut Value,
    section: &str,
    name: &str,
    entry: Value,
    file: Option<&Path>,
) -> anyhow::Result<bool> {
    let shown = || {
        file.map(|f| f.display().to_string())
            .unwrap_or_else(|| "the document".into())
    };
    let Value::Object(top) = doc else {
        bail!("{}: the top level is not a JSON object", shown());
    };
    let servers = top
        .entry(section.to_string())
        .or_insert_with(|| Value::Object(Map::new()));
    let Value::Object(servers) = servers else {
        bail!("{}: `{section}` is not an object", shown());
    };
    Ok(servers.insert(name.to_string(), entry).is_some())
}

fn add_vscode_input(doc: &mut Value, file: Option<&Path>) -> anyhow::Result<()> {
    let inputs = doc
        .as_object_mut()
        .expect("merge checked the top level")
        .entry("inputs")
        .or_insert_with(|| json!([]));
    let Value::Array(inputs) = inputs else {
        bail!(
            "{}: `inputs` is not an array",
            file.map(|f| f.display().to_string()).unwrap_or_default()
        );
    };
    if !inputs.iter().any(|i| i["id"] == VSCODE_INPUT) {
        inputs.push(json!({
            "type": "promptString",
            "id": VSCODE_INPUT,
            "description": "MCC API key",
            "password": true,
        }));
    }
    Ok(())
}

/// The same entry as `claude mcp add` would write it.
fn claude_add_command(args: &InstallArgs, cred: &Credential) -> String {
    let mut cmd = format!(
        "# or: claude mcp add --transport http --scope project {} {}",
        args.name, args.url
    );
    if let Some(b) = bearer(Client::ClaudeCode, cred) {
        cmd.push_str(&format!(" --header \"Authorization: {b}\""));
    }
    cmd
}

/// An existing JSON file (a missing one is empty); a file that is not JSON is refused,
/// never overwritten.
fn read_json(file: &Path) -> anyhow::Result<Value> {
    match std::fs::read_to_string(file) {
        Ok(text) if text.trim().is_empty() => Ok(Value::Object(Map::new())),
        Ok(text) => serde_json::from_str(&text).with_context(|| {
            format!(
                "{}: not JSON; fix or move it, it was left unchanged",
                file.display()
            )
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Value::Object(Map::new())),
        Err(e) => Err(e).with_context(|| format!("reading {}", file.display())),
    }
}

fn write(file: &Path, text: &str) -> anyhow::Result<()> {
    if let Some(dir) = file.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(file, text).with_context(|| format!("writing {}", file.display()))
}

/// goose keeps its extensions in YAML: the entry is merged into the file's `extensions`
/// (the rest is kept; YAML comments are not).
fn goose(
    args: &InstallArgs,
    cred: &Credential,
    file: Option<&Path>,
    format: Format,
) -> anyhow::Result<()> {
    let headers = match cred {
        Credential::None => json!({}),
        Credential::Literal(t) => json!({"Authorization": format!("Bearer {t}")}),
        Credential::Env(var) => json!({"Authorization": format!("Bearer ${{{var}}}")}),
    };
    let entry = json!({
        "enabled": true,
        "type": "streamable_http",
        "name": args.name,
        "description": "MCC tool catalog",
        "uri": args.url,
        "headers": headers,
        "envs": {},
        "env_keys": [],
        "timeout": 300,
        "bundled": null,
    });
    let file = file.expect("goose has a default file");
    let mut doc = if args.print {
        Value::Object(Map::new())
    } else {
        match std::fs::read_to_string(file) {
            Ok(text) if !text.trim().is_empty() => {
                if text.lines().any(|l| l.trim_start().starts_with('#')) {
                    eprintln!("note: {}: its YAML comments are not kept", file.display());
                }
                serde_saphyr::from_str::<Value>(&text).with_context(|| {
                    format!(
                        "{}: not YAML; fix or move it, it was left unchanged",
                        file.display()
                    )
                })?
            }
            Ok(_) => Value::Object(Map::new()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Value::Object(Map::new()),
            Err(e) => return Err(e).with_context(|| format!("reading {}", file.display())),
        }
    };
    if doc.is_null() {
        doc = Value::Object(Map::new());
    }
    let replaced = merge(&mut doc, "extensions", &args.name, entry, Some(file))?;
    let yaml = serde_saphyr::to_string(&doc).context("writing YAML")?;
    let yaml = if yaml.ends_with('\n') {
        yaml
    } else {
        yaml + "\n"
    };
    if args.print {
        print!("{yaml}");
        return Ok(());
    }
    write(file, &yaml)?;
    report(file, &args.name, replaced, format);
    Ok(())
}
