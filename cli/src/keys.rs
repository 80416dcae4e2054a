//! `mcc key mint|list|revoke` (and MCC's `user key add|list|revoke`).
//!
//! File mode: the users file is read by the catalog's one reader
//! ([`mcc_catalog::users::parse`]) and keys are minted by the gateway
//! ([`mcc_gateway::auth::api_key::mint`], the one key format of [`mcc_catalog::apikey`]);
//! only the prefix and SHA-256 are written, the key itself is printed once. The file is
//! written back as YAML: its leading comment block is kept, other comments are not.
//!
//! Kubernetes mode (`--kubernetes`): the operator mints keys for a UserGrant with
//! `apiKey.enabled`. `mint` prints the grant, `revoke` and `list` the kubectl commands;
//! `--apply` runs them with kubectl (which needs a cluster).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, anyhow, bail};
use chrono::{Duration, Timelike, Utc};
use mcc_catalog::User;
use mcc_catalog::crd::ApiKeySpec;
use mcc_catalog::users::{UserEntry, parse};
use serde_json::{Value, json};

use crate::args::{KeyCommand, KeyListArgs, KeyStore, MintArgs, RevokeArgs, UserCommand};
use crate::output::{self, Format};

/// The users file of `--users`, MCC_USERS_FILE, else the gateway's default.
fn users_file(store: &KeyStore) -> PathBuf {
    store
        .users
        .clone()
        .or_else(|| mcc_gateway::config::Settings::default().users_file)
        .unwrap_or_else(|| PathBuf::from("examples/users/users.yaml"))
}

/// How a users file is named in errors: the flag, or the default and how to change it.
fn label(store: &KeyStore, path: &Path) -> String {
    match &store.users {
        Some(_) => format!("--users {}", path.display()),
        None => format!(
            "{} (the default users file: pass --users FILE or set MCC_USERS_FILE)",
            path.display()
        ),
    }
}

/// The file's entries and its leading comment block; a missing file is empty.
fn read(path: &Path, label: &str) -> anyhow::Result<(Vec<UserEntry>, String)> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok((Vec::new(), String::new()));
        }
        Err(e) => return Err(e).with_context(|| label.to_string()),
    };
    let header: String = text
        .lines()
        .take_while(|l| l.starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect();
    if text.trim().is_empty() {
        return Ok((Vec::new(), header));
    }
    let entries = parse(&text).map_err(|e| anyhow!("{label}: {e}"))?;
    Ok((entries, header))
}

fn write(path: &Path, header: &str, entries: &[UserEntry]) -> anyhow::Result<()> {
    let mut users = serde_json::to_value(entries)?;
    // An empty `tools` list says nothing: not written (the reader's default).
    for u in users.as_array_mut().into_iter().flatten() {
        if u["tools"].as_array().is_some_and(|t| t.is_empty())
            && let Some(m) = u.as_object_mut()
        {
            m.remove("tools");
        }
    }
    let yaml = serde_saphyr::to_string(&json!({ "users": users })).context("writing YAML")?;
    let yaml = if yaml.ends_with('\n') {
        yaml
    } else {
        yaml + "\n"
    };
    let text = format!("{header}{yaml}");
    // The written file must read back as it was meant (the gateway's reader).
    parse(&text)
        .map_err(|e| anyhow!("{}: the rewritten file does not parse: {e}", path.display()))?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    // Replace atomically: the gateway may be polling the file.
    let tmp = path.with_extension("yaml.mcc-tmp");
    std::fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
    // The new file keeps the old one's permissions (a users file may be private).
    if let Ok(meta) = std::fs::metadata(path) {
        let _ = std::fs::set_permissions(&tmp, meta.permissions());
    }
    std::fs::rename(&tmp, path).with_context(|| format!("replacing {}", path.display()))
}

/// `--expires N|never` as days.
fn expiry_days(expires: &str) -> anyhow::Result<Option<u32>> {
    if expires == "never" {
        return Ok(None);
    }
    match expires.parse::<u32>() {
        Ok(0) | Err(_) => {
            bail!("--expires {expires}: expected a number of days (1 or more) or `never`")
        }
        Ok(n) => Ok(Some(n)),
    }
}

pub fn mint(args: MintArgs, format: Format) -> anyhow::Result<()> {
    let days = expiry_days(&args.expires)?;
    if args.username.trim().is_empty() {
        bail!("USERNAME: must not be empty");
    }
    if args.store.kubernetes {
        return mint_grant(&args, days);
    }
    let path = users_file(&args.store);
    let (mut entries, header) = read(&path, &label(&args.store, &path))?;
    let index = match entries
        .iter()
        .position(|e| e.user.username == args.username)
    {
        Some(i) => i,
        None if !args.groups.is_empty() => {
            entries.push(UserEntry {
                user: User {
                    username: args.username.clone(),
                    groups: args.groups.clone(),
                    ..User::default()
                },
                ..UserEntry::default()
            });
            entries.len() - 1
        }
        None => bail!(
            "user '{}' is not in {} (add them with --group GROUP, or edit the file)",
            args.username,
            path.display()
        ),
    };
    let now = Utc::now();
    let expires_at =
        days.map(|d| now.with_nanosecond(0).unwrap_or(now) + Duration::days(i64::from(d)));
    let minted = mcc_gateway::auth::api_key::mint(expires_at)?;
    let entry = &mut entries[index];
    if !args.keep {
        entry.api_keys.clear();
    }
    entry.api_keys.push(minted.entry.clone());
    write(&path, &header, &entries)?;
    let expires = expires_at.map(|t| t.to_rfc3339());
    match format {
        Format::Json => output::json(&json!({
            "username": args.username,
            "key": minted.raw.expose(),
            "prefix": minted.entry.prefix,
            "expires_at": expires,
            "file": path,
        })),
        Format::Text => {
            println!("{}", minted.raw.expose());
            eprintln!(
                "API key for '{}' (prefix {}, {}) added to {}; it is shown only now",
                args.username,
                minted.entry.prefix,
                match &expires {
                    Some(t) => format!("expires {t}"),
                    None => "never expires".into(),
                },
                path.display()
            );
        }
    }
    Ok(())
}

pub fn list(args: KeyListArgs, format: Format) -> anyhow::Result<()> {
    if args.store.kubernetes {
        let cmd = vec![
            "kubectl".to_string(),
            "get".into(),
            "usergrants.mcc.dev".into(),
            "-n".into(),
            args.store.namespace.clone(),
            "-o".into(),
            "custom-columns=NAME:.metadata.name,USER:.spec.username,PREFIX:.status.apiKey.prefix,EXPIRES:.status.apiKey.expiresAt".into(),
        ];
        return kubectl(&cmd, None, args.store.apply);
    }
    let path = users_file(&args.store);
    if !path.is_file() {
        bail!("{}: no such file", label(&args.store, &path));
    }
    let (entries, _) = read(&path, &label(&args.store, &path))?;
    let now = Utc::now();
    let rows: Vec<Value> = entries
        .iter()
        .flat_map(|e| {
            e.api_keys.iter().map(|k| {
                json!({
                    "username": e.user.username,
                    "prefix": k.prefix,
                    "expires_at": k.expires_at.map(|t| t.to_rfc3339()),
                    "expired": k.expires_at.is_some_and(|t| t <= now),
                })
            })
        })
        .collect();
    match format {
        Format::Json => output::json(&Value::Array(rows)),
        Format::Text => {
            let mut table = vec![("USER".to_string(), "PREFIX        EXPIRES".to_string())];
            for r in &rows {
                let expires = match (r["expires_at"].as_str(), r["expired"].as_bool()) {
                    (Some(t), Some(true)) => format!("{t} (expired)"),
                    (Some(t), _) => t.to_string(),
                    (None, _) => "never".into(),
                };
                table.push((
                    r["username"].as_str().unwrap_or("").to_string(),
                    format!("{:<12}  {expires}", r["prefix"].as_str().unwrap_or("")),
                ));
            }
            output::table(&table);
        }
    }
    Ok(())
}

pub fn revoke(args: RevokeArgs, format: Format) -> anyhow::Result<()> {
    if args.store.kubernetes {
        let name = mcc_operator::convert::object_name(&args.username);
        let cmd = vec![
            "kubectl".to_string(),
            "patch".into(),
            "usergrants.mcc.dev".into(),
            name,
            "-n".into(),
            args.store.namespace.clone(),
            "--type".into(),
            "merge".into(),
            "-p".into(),
            r#"{"spec":{"apiKey":{"enabled":false}}}"#.into(),
        ];
        return kubectl(&cmd, None, args.store.apply);
    }
    let path = users_file(&args.store);
    if !path.is_file() {
        bail!("{}: no such file", label(&args.store, &path));
    }
    let (mut entries, header) = read(&path, &label(&args.store, &path))?;
    let entry = entries
        .iter_mut()
        .find(|e| e.user.username == args.username)
        .ok_or_else(|| anyhow!("User '{}' not found in {}", args.username, path.display()))?;
    let before = entry.api_keys.len();
    match &args.prefix {
        Some(p) => entry.api_keys.retain(|k| &k.prefix != p),
        None => entry.api_keys.clear(),
    }
    let removed = before - entry.api_keys.len();
    if removed == 0 {
        match &args.prefix {
            Some(p) => bail!(
                "--prefix {p}: user '{}' has no such key in {}",
                args.username,
                path.display()
            ),
            None => bail!(
                "No key found for user '{}' in {}",
                args.username,
                path.display()
            ),
        }
    }
    write(&path, &header, &entries)?;
    match format {
        Format::Json => {
            output::json(&json!({"username": args.username, "revoked": removed, "file": path}))
        }
        Format::Text => println!(
            "revoked {removed} key{} of '{}' in {}",
            if removed == 1 { "" } else { "s" },
            args.username,
            path.display()
        ),
    }
    Ok(())
}

/// MCC's `user key add|list|revoke`.
pub fn user(command: UserCommand, format: Format) -> anyhow::Result<()> {
    let UserCommand::Key { command } = command;
    match command {
        KeyCommand::Mint(a) => mint(a, format),
        KeyCommand::List(a) => list(a, format),
        KeyCommand::Revoke(a) => revoke(a, format),
    }
}

/// A UserGrant asking the operator for a key (the operator mints it into the Secret
/// `<grant>-api-key`).
fn mint_grant(args: &MintArgs, days: Option<u32>) -> anyhow::Result<()> {
    let entry = UserEntry {
        user: User {
            username: args.username.clone(),
            groups: args.groups.clone(),
            ..User::default()
        },
        ..UserEntry::default()
    };
    let mut grant = mcc_operator::manifests::grant_resource(entry, &args.store.namespace);
    grant.spec.api_key = Some(ApiKeySpec {
        enabled: true,
        ttl_days: days,
    });
    let name = grant.metadata.name.clone().unwrap_or_default();
    let yaml = serde_saphyr::to_string(&grant).context("writing the UserGrant as YAML")?;
    let yaml = if yaml.ends_with('\n') {
        yaml
    } else {
        yaml + "\n"
    };
    let read_key = format!(
        "kubectl -n {} get secret {name}-api-key -o jsonpath='{{.data.apiKey}}' | base64 -d",
        args.store.namespace
    );
    if args.store.apply {
        let cmd = ["kubectl", "apply", "-f", "-"].map(String::from).to_vec();
        kubectl(&cmd, Some(&yaml), true)?;
    } else {
        print!("{yaml}");
        eprintln!("# apply it with `kubectl apply -f -` (or pass --apply; needs a cluster)");
    }
    eprintln!("# the operator mints the key; read it with: {read_key}");
    Ok(())
}

/// Prints `cmd`, or runs it with `--apply` (stdin from `input`).
fn kubectl(cmd: &[String], input: Option<&str>, apply: bool) -> anyhow::Result<()> {
    let shown = cmd
        .iter()
        .map(|a| {
            if a.contains([' ', '{', '"']) {
                format!("'{a}'")
            } else {
                a.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(" ");
    if !apply {
        println!("{shown}");
        eprintln!("# run it, or pass --apply (needs kubectl and a cluster)");
        return Ok(());
    }
    let mut child = Command::new(&cmd[0])
        .args(&cmd[1..])
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .spawn()
        .with_context(|| format!("--apply: cannot run {}", cmd[0]))?;
    if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
        stdin.write_all(text.as_bytes())?;
    }
    let status = child.wait()?;
    if !status.success() {
        bail!("--apply: `{shown}` failed ({status})");
    }
    Ok(())
}
