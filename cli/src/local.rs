//! Tools from local tool files, run by the gateway's own engine: the settings
//! ([`mcc_gateway::config`]), the catalog loading ([`mcc_gateway::catalog::LiveCatalog`]),
//! RBAC and params ([`mcc_catalog`]), the context ([`mcc_catalog::context`]), sessions
//! ([`mcc_gateway::session`]) and the run ([`mcc_gateway::exec::Engine`]) are the ones
//! `mcc-gateway serve` uses; only the wiring is here.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, anyhow, bail};
use mcc_catalog::{Tool, User, context};
use mcc_gateway::calls::text;
use mcc_gateway::catalog::{Catalog, LiveCatalog};
use mcc_gateway::config::{self, Settings};
use mcc_gateway::exec::introspect::RuntimeInterpreter;
use mcc_gateway::exec::{Call, Engine, Outcome};
use mcc_gateway::mcp::execute::parse_shell_json;
use mcc_gateway::session::{Scope, SessionStore};
use serde_json::{Map, Value};

use crate::source::Source;

/// The user `mcc` acts as without `--as`: MCC's synthetic CLI admin.
pub const CLI_USER: &str = "cli";

/// A loaded catalog, the engine and the session store, acting as one user.
pub struct Local {
    catalog: Arc<Catalog>,
    engine: Engine,
    sessions: SessionStore,
    user: User,
    /// What was loaded, for messages: `--tools a.yaml, b/`.
    origin: String,
}

/// What a call produced, for printing.
pub struct Called {
    pub outcome: Outcome,
}

impl Local {
    /// Loads the settings (`--config`, MCC_SETTINGS_FILE, `MCC_*`), replaces their tools
    /// and users file with `--tools`/`--users`, loads the catalog and resolves `--as`.
    pub async fn open(source: &Source) -> anyhow::Result<Self> {
        let settings = settings(source)?;
        let origin = format!("tool files {}", settings.tools.join(", "));
        let runtime = settings.execution.build(settings.catalog.source);
        let introspector = RuntimeInterpreter::introspector(runtime.clone(), &settings.env_floor);
        let (entries, users) = (settings.tools.clone(), settings.users_file.clone());
        let live =
            tokio::task::spawn_blocking(move || LiveCatalog::load(entries, users, introspector))
                .await
                .context("loading the tool files")?;
        let live = match live {
            Ok(live) => live,
            // The cause names the path; say where the default came from.
            Err(e) if source.tools.is_empty() => {
                return Err(anyhow::Error::new(e).context(format!(
                    "the settings' tool files {} (pass --tools PATH or --config FILE)",
                    settings.tools.join(", ")
                )));
            }
            Err(e) => return Err(e.into()),
        };
        let catalog = live.snapshot();
        let user = match &source.as_user {
            None => User {
                username: CLI_USER.into(),
                groups: vec!["admin".into()],
                ..User::default()
            },
            Some(name) => live
                .directory()
                .current()
                .by_username(name)
                .cloned()
                .ok_or_else(|| match &settings.users_file {
                    Some(f) => anyhow!("--as {name}: no such user in {}", f.display()),
                    None => anyhow!("--as {name}: no users file (pass --users FILE)"),
                })?,
        };
        let sessions = SessionStore::from_settings(&settings.session)
            .context("the settings' session store")?;
        let engine = Engine::new(settings.engine_settings(runtime));
        Ok(Self {
            catalog,
            engine,
            sessions,
            user,
            origin,
        })
    }

    /// The tools this user may run, sorted by key.
    pub fn tools(&self) -> Vec<&Tool> {
        let mut tools: Vec<&Tool> = self
            .catalog
            .tools()
            .iter()
            .filter(|t| t.allows(Some(&self.user)))
            .collect();
        tools.sort_by(|a, b| a.key.cmp(&b.key));
        tools
    }

    /// A tool this user may run; an unknown key and a refused one name the key.
    pub fn tool(&self, key: &str) -> anyhow::Result<&Tool> {
        let tool = self
            .catalog
            .tool(key)
            .ok_or_else(|| anyhow!("{} (in {})", text::unknown_tool(key), self.origin))?;
        if !tool.allows(Some(&self.user)) {
            bail!(
                "{}: user '{}' may not run '{key}'",
                text::UNAUTHORIZED,
                self.user.username
            );
        }
        Ok(tool)
    }

    fn scope(&self, session: Option<&str>) -> anyhow::Result<Scope> {
        match session {
            None => Ok(Scope::default_for(&self.user.username)),
            Some(h) => {
                Scope::new(h, &self.user.username).map_err(|e| anyhow!("--session {h}: {e}"))
            }
        }
    }

    /// Sets a session variable (the checks of `set_session`).
    pub async fn set_var(
        &self,
        session: Option<&str>,
        name: &str,
        value: Value,
    ) -> anyhow::Result<()> {
        context::check_writable(name).map_err(|e| anyhow!("session variable '{name}': {e}"))?;
        let scope = self.scope(session)?;
        self.sessions
            .set(&scope, name, value)
            .await
            .map_err(|e| anyhow!("session variable '{name}': {e}"))
    }

    /// A session variable (`null` when unset); identity keys answer with the user's.
    pub async fn get_var(&self, session: Option<&str>, name: &str) -> anyhow::Result<Value> {
        let scope = self.scope(session)?;
        let stored = self
            .sessions
            .vars(&scope)
            .await
            .map_err(|e| anyhow!("session: {e}"))?;
        let ctx = context::assemble(Some(&self.user), &stored);
        Ok(ctx.get(name).cloned().unwrap_or(Value::Null))
    }

    /// Runs a tool as the gateway's `execute` does: authorize, validate, assemble the
    /// context, run, write back an fn tool's context, parse shell output that is JSON.
    pub async fn call(
        &self,
        key: &str,
        given: Map<String, Value>,
        session: Option<&str>,
    ) -> anyhow::Result<Called> {
        let tool = self.tool(key)?;
        let params = mcc_catalog::params::validate(tool, &given)
            .map_err(|e| anyhow!("{}", text::validation_error(key, &e)))?;
        let scope = self.scope(session)?;
        let stored = self
            .sessions
            .vars(&scope)
            .await
            .map_err(|e| anyhow!("session: {e}"))?;
        let mut ctx = context::assemble(Some(&self.user), &stored);
        context::fit_env(&mut ctx);
        let given_ctx = ctx.clone();
        let execution = self
            .engine
            .execute(Call {
                tool,
                refs: None,
                params,
                context: ctx,
                caller: &self.user.username,
            })
            .await?;
        if let (Outcome::Success(_), Some(left)) = (&execution.outcome, &execution.write_back)
            && tool.kind.is_fn()
            && !execution.cached
        {
            match context::write_back_diff(&given_ctx, left) {
                Ok(changes) => {
                    if let Err(e) = self.sessions.apply(&scope, &changes).await {
                        eprintln!("warning: {key}: context write-back not applied: {e}");
                    }
                }
                Err(e) => eprintln!("warning: {key}: context write-back rejected: {e}"),
            }
        }
        Ok(Called {
            outcome: parse_shell_json(tool, execution.outcome),
        })
    }
}

/// The gateway's settings with the command line's tools and users file on top. The
/// default users file is used only when it exists; one named by a flag or the settings
/// must exist.
pub fn settings(source: &Source) -> anyhow::Result<Settings> {
    let env = |name: &str| std::env::var(name).ok();
    let file = config::settings_path(source.config.clone(), &env);
    let mut settings = config::load(file.as_deref(), &env)?;
    let default_users = Settings::default().users_file;
    if !source.tools.is_empty() {
        settings.tools = source.tools.clone();
    }
    match &source.users {
        Some(path) => {
            if !path.is_file() {
                bail!("--users {}: no such file", path.display());
            }
            settings.users_file = Some(path.clone());
        }
        None => {
            if settings.users_file == default_users
                && !settings.users_file.as_deref().is_some_and(|p| p.is_file())
            {
                settings.users_file = None::<PathBuf>;
            }
        }
    }
    Ok(settings)
}
