//! `mcc tool list|info|call` and `mcc session new|set|get`: the same commands against
//! local tool files ([`Local`]) or a gateway ([`Remote`], with `--url`), and how their
//! results are printed.

use std::io::Write;
use std::process::ExitCode;

use anyhow::bail;
use mcc_gateway::exec::Outcome;
use serde_json::{Value, json};

use crate::args::{CallArgs, InfoArgs, ListArgs, SessionArgs, SessionGetArgs, SessionSetArgs};
use crate::local::Local;
use crate::output::{self, Format};
use crate::params;
use crate::remote::{self, Remote};
use crate::source::Source;

enum Backend {
    Local(Box<Local>),
    Remote(Remote),
}

impl Backend {
    async fn open(source: &Source) -> anyhow::Result<Self> {
        Ok(match source.url {
            Some(_) => Backend::Remote(Remote::connect(source).await?),
            None => Backend::Local(Box::new(Local::open(source).await?)),
        })
    }

    async fn close(self) {
        if let Backend::Remote(r) = self {
            r.close().await;
        }
    }
}

pub async fn list(args: ListArgs, format: Format) -> anyhow::Result<ExitCode> {
    let backend = Backend::open(&args.source).await?;
    let mut rows: Vec<Value> = Vec::new();
    match &backend {
        Backend::Local(local) => {
            for t in local.tools() {
                rows.push(json!({
                    "key": t.key,
                    "description": t.description,
                    "groups": t.groups,
                    "signature": mcc_catalog::signature(t),
                }));
            }
        }
        Backend::Remote(remote) => {
            for d in remote.tools().await? {
                let mut row = json!({"key": d.key, "description": d.description});
                if args.long {
                    row["signature"] = json!(remote.signature(&d.key).await?);
                }
                rows.push(row);
            }
        }
    }
    backend.close().await;
    match format {
        Format::Json => output::json(&Value::Array(rows)),
        Format::Text if args.long => {
            let blocks: Vec<&str> = rows
                .iter()
                .filter_map(|r| r["signature"].as_str().map(str::trim_end))
                .collect();
            println!("{}", blocks.join("\n\n"));
        }
        Format::Text => output::table(
            &rows
                .iter()
                .map(|r| {
                    (
                        r["key"].as_str().unwrap_or("").to_string(),
                        output::first_line(r["description"].as_str().unwrap_or("")),
                    )
                })
                .collect::<Vec<_>>(),
        ),
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn info(args: InfoArgs, format: Format) -> anyhow::Result<ExitCode> {
    let backend = Backend::open(&args.source).await?;
    let value = match &backend {
        Backend::Local(local) => {
            let t = local.tool(&args.key)?;
            json!({
                "key": t.key,
                "description": t.description,
                "groups": t.groups,
                "signature": mcc_catalog::signature(t),
                "params": t.visible_params().map(|p| json!({
                    "name": p.name,
                    "type": p.ty.as_str(),
                    "required": p.required,
                    "default": p.default,
                    "description": p.description,
                })).collect::<Vec<_>>(),
                "source": t.source,
            })
        }
        Backend::Remote(remote) => {
            json!({"key": args.key, "signature": remote.signature(&args.key).await?})
        }
    };
    backend.close().await;
    match format {
        Format::Json => output::json(&value),
        Format::Text => println!("{}", value["signature"].as_str().unwrap_or("")),
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn call(args: CallArgs, format: Format) -> anyhow::Result<ExitCode> {
    let given = params::parse(&args.params)?;
    let sets = args
        .set
        .iter()
        .map(|s| params::session_var(s))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let session = args.session.as_deref();
    let backend = Backend::open(&args.source).await?;
    let code = match &backend {
        Backend::Local(local) => {
            for (name, value) in sets {
                local.set_var(session, &name, value).await?;
            }
            let called = local.call(&args.key, given, session).await?;
            print_outcome(&args.key, &called.outcome, format, args.pretty)
        }
        Backend::Remote(remote) => {
            for (name, value) in sets {
                remote.set_var(session, &name, value).await?;
            }
            match remote.execute(&args.key, given, session).await? {
                Ok(result) => {
                    let value = match &result.structured_content {
                        Some(v) => v.clone(),
                        None => {
                            let text = remote::text_of(&result);
                            // As the gateway does for shell output: JSON text is JSON.
                            serde_json::from_str(&text).unwrap_or(Value::String(text))
                        }
                    };
                    print_outcome(&args.key, &Outcome::Success(value), format, args.pretty)
                }
                Err(notice) => {
                    backend.close().await;
                    bail!("{notice}");
                }
            }
        }
    };
    backend.close().await;
    Ok(code)
}

/// Prints a result as MCC's CLI does: a string as is, other values as JSON; a failure's
/// stdout on stdout, its stderr on stderr, and the tool's exit code as ours.
fn print_outcome(key: &str, outcome: &Outcome, format: Format, pretty: bool) -> ExitCode {
    let render = |v: &Value| {
        if pretty {
            serde_json::to_string_pretty(v).unwrap_or_default()
        } else {
            v.to_string()
        }
    };
    match (format, outcome) {
        (Format::Json, Outcome::Success(v)) => {
            output::json(&json!({"key": key, "ok": true, "result": v}));
            ExitCode::SUCCESS
        }
        (
            Format::Json,
            Outcome::Failure {
                code,
                stdout,
                stderr,
            },
        ) => {
            output::json(
                &json!({"key": key, "ok": false, "code": code, "stdout": stdout, "stderr": stderr}),
            );
            exit_code(*code)
        }
        (Format::Text, Outcome::Success(Value::String(s))) => {
            print!("{s}");
            if !s.is_empty() && !s.ends_with('\n') {
                println!();
            }
            ExitCode::SUCCESS
        }
        (Format::Text, Outcome::Success(Value::Null)) => ExitCode::SUCCESS,
        (Format::Text, Outcome::Success(v)) => {
            println!("{}", render(v));
            ExitCode::SUCCESS
        }
        (
            Format::Text,
            Outcome::Failure {
                code,
                stdout,
                stderr,
            },
        ) => {
            print!("{stdout}");
            let _ = std::io::stdout().flush();
            eprint!("{stderr}");
            if !stderr.is_empty() && !stderr.ends_with('\n') {
                eprintln!();
            }
            eprintln!("error: tool '{key}' failed with exit code {code}");
            exit_code(*code)
        }
    }
}

/// A failure's code as a process exit code: 1–255 as is, anything else (a timeout's -1)
/// as 1, so a failure never exits 0.
fn exit_code(code: i32) -> ExitCode {
    ExitCode::from(u8::try_from(code).ok().filter(|&c| c != 0).unwrap_or(1))
}

pub async fn session_new(args: SessionArgs, _format: Format) -> anyhow::Result<ExitCode> {
    let Backend::Remote(remote) = Backend::open(&args.source).await? else {
        bail!(
            "mcc session new needs --url: local runs take any handle as --session NAME \
             (letters, digits, '-' and '_')"
        );
    };
    let handle = remote.new_session().await?;
    remote.close().await;
    println!("{handle}");
    Ok(ExitCode::SUCCESS)
}

pub async fn session_set(args: SessionSetArgs, _format: Format) -> anyhow::Result<ExitCode> {
    let value = params::json_or_string(&args.value);
    let session = args.session.as_deref();
    let backend = Backend::open(&args.source).await?;
    match &backend {
        Backend::Local(l) => l.set_var(session, &args.name, value).await?,
        Backend::Remote(r) => r.set_var(session, &args.name, value).await?,
    }
    backend.close().await;
    println!("{}", mcc_catalog::context::set_confirmation(&args.name));
    Ok(ExitCode::SUCCESS)
}

pub async fn session_get(args: SessionGetArgs, _format: Format) -> anyhow::Result<ExitCode> {
    let session = args.session.as_deref();
    let backend = Backend::open(&args.source).await?;
    let value = match &backend {
        Backend::Local(l) => l.get_var(session, &args.name).await?,
        Backend::Remote(r) => r.get_var(session, &args.name).await?,
    };
    backend.close().await;
    println!("{value}");
    Ok(ExitCode::SUCCESS)
}
