//! fn tools filled in by a real `python3` running the shipped runner: types, defaults,
//! required, return type, docstring, callable paths, names, noisy imports, import errors,
//! declared params left alone, one interpreter run per environment batch, timeouts.

use std::path::{Path, PathBuf};
use std::time::Duration;

use mcc_catalog::introspect::Introspector;
use mcc_catalog::{Loaded, ParamType, Tool, load};
use serde_json::json;

/// A tempdir holding Python modules and one tool file whose fn tools run with `cwd` there.
struct Project {
    dir: tempfile::TempDir,
}

impl Project {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn module(&self, name: &str, source: &str) -> &Self {
        std::fs::write(self.path().join(format!("{name}.py")), source).unwrap();
        self
    }

    /// Writes `tools.yaml` with `cwd: <dir>` cascaded through a YAML anchor.
    fn tools(&self, entries: &str) -> PathBuf {
        let text = format!(
            "x-py: &py\n  cwd: {}\ntools:\n{entries}",
            self.path().display()
        );
        let file = self.path().join("tools.yaml");
        std::fs::write(&file, text).unwrap();
        file
    }

    fn load_with(&self, entries: &str, introspector: &Introspector) -> Result<Loaded, String> {
        let file = self.tools(entries);
        load(&[file.display().to_string()], introspector).map_err(|e| e.to_string())
    }

    fn load(&self, entries: &str) -> Result<Loaded, String> {
        self.load_with(entries, &Introspector::default())
    }
}

fn find<'a>(loaded: &'a Loaded, key: &str) -> &'a Tool {
    loaded
        .tools
        .iter()
        .find(|t| t.key == key)
        .unwrap_or_else(|| {
            panic!(
                "no {key} in {:?}",
                loaded.tools.iter().map(|t| &t.key).collect::<Vec<_>>()
            )
        })
}

const TYPED: &str = r#"
from typing import Any, Dict, List, Optional

def greet(name: str, times: int = 3, ratio: float = 0.5, loud: bool = False,
          tags: list = None, meta: dict = None, untyped=None, maybe: Optional[int] = None,
          items: List[str] = None, table: Dict[str, Any] = None, *args, when: str = "now",
          **kwargs) -> str:
    """Greets someone.

    Second paragraph."""
    return name

def union(x: "int | None" = None, y: "list[str]" = None) -> Optional[int]:
    return x

async def later(delay: float) -> dict:
    return {}

def paginate(cursor: int = 0, context: dict = None) -> list:
    return []

class Api:
    def method(self, q: str) -> Dict[str, int]:
        "Queries the API."
        return {}

api = Api()
alias = greet
"#;

#[test]
fn types_defaults_required_return_type_and_docstring() {
    let p = Project::new();
    p.module("typed", TYPED);
    let loaded = p
        .load(
            "  - fn: typed.greet\n    groups: [ops]\n    <<: *py\n\
             \x20 - fn: typed:union\n    <<: *py\n\
             \x20 - fn: typed:later\n    <<: *py\n\
             \x20 - fn: typed:paginate\n    <<: *py\n",
        )
        .unwrap();
    let greet = find(&loaded, "ops.greet");
    let shape: Vec<(&str, ParamType, bool)> = greet
        .params
        .iter()
        .map(|p| (p.name.as_str(), p.ty, p.required))
        .collect();
    assert_eq!(
        shape,
        [
            ("name", ParamType::Str, true),
            ("times", ParamType::Int, false),
            ("ratio", ParamType::Float, false),
            ("loud", ParamType::Bool, false),
            ("tags", ParamType::List, false),
            ("meta", ParamType::Dict, false),
            ("untyped", ParamType::Str, false),
            ("maybe", ParamType::Int, false),
            ("items", ParamType::List, false),
            ("table", ParamType::Dict, false),
            ("when", ParamType::Str, false),
        ],
        "*args/**kwargs skipped, keyword-only kept, Optional[X] is X, generics by origin"
    );
    assert_eq!(greet.params[1].default, Some(json!(3)));
    assert_eq!(greet.return_type.as_deref(), Some("str"));
    assert_eq!(greet.description, "Greets someone.\n\nSecond paragraph.");
    assert_eq!(
        mcc_catalog::signature(greet).lines().next().unwrap(),
        "## ops.greet (name:str, times:int=3, ratio:float=0.5, loud:bool=False, tags:list=None, \
         meta:dict=None, untyped:str=\"\", maybe:int=None, items:list=None, table:dict=None, \
         when:str=\"now\") -> str"
    );

    let union = find(&loaded, "union");
    let types: Vec<ParamType> = union.params.iter().map(|p| p.ty).collect();
    assert_eq!(
        types,
        [ParamType::Int, ParamType::List],
        "string annotations resolved"
    );
    assert_eq!(union.return_type.as_deref(), Some("Optional[int]"));

    let later = find(&loaded, "later");
    assert_eq!(later.return_type.as_deref(), Some("dict"));
    assert!(later.params[0].required);

    let paginate = find(&loaded, "paginate");
    assert!(paginate.takes_context());
    assert_eq!(
        mcc_catalog::signature(paginate),
        "## paginate (cursor:int=0) -> list\n",
        "the context parameter is hidden"
    );
}

#[test]
fn callable_paths_and_names_from_dunder_name() {
    let p = Project::new();
    p.module("typed", TYPED);
    let loaded = p
        .load(
            "  - fn: typed:Api.method\n    groups: [public, api]\n    <<: *py\n\
             \x20 - fn: typed:api.method\n    name: bound\n    <<: *py\n\
             \x20 - fn: typed:alias\n    groups: [ops]\n    <<: *py\n\
             \x20 - fn: typed.alias\n    name: aliased\n    <<: *py\n",
        )
        .unwrap();
    let unbound = find(&loaded, "public.api.method");
    assert_eq!(
        unbound.params[0].name, "self",
        "as MCC: Class.method includes self"
    );
    assert_eq!(unbound.return_type.as_deref(), Some("Dict[str, int]"));
    assert_eq!(unbound.description, "Queries the API.");
    let bound = find(&loaded, "bound");
    assert_eq!(bound.params.len(), 1);
    let alias = find(&loaded, "ops.greet");
    assert_eq!(
        (alias.name.as_str(), alias.key.as_str()),
        ("greet", "ops.greet"),
        "no name given: the callable's __name__, key recomputed"
    );
    assert_eq!(
        find(&loaded, "aliased").name,
        "aliased",
        "a given name stays"
    );
}

#[test]
fn declared_params_are_never_overwritten() {
    let p = Project::new();
    p.module("typed", TYPED);
    let loaded = p
        .load(
            "  - fn: typed:greet\n    name: hello\n    description: Mine.\n    <<: *py\n\
             \x20   params:\n      - name: name\n        required: true\n        description: Who.\n",
        )
        .unwrap();
    let t = find(&loaded, "hello");
    assert_eq!(t.params.len(), 1);
    assert_eq!(t.params[0].description, "Who.");
    assert_eq!(
        t.return_type.as_deref(),
        Some("str"),
        "the missing return type is filled"
    );
    assert_eq!(t.description, "Mine.", "a declared description stays");
}

#[test]
fn output_printed_on_import_does_not_corrupt_the_result() {
    let p = Project::new();
    p.module(
        "noisy",
        "import os, sys\nprint('print on import')\nos.write(1, b'raw fd 1 write\\n')\n\
         os.system('echo from a child process')\nsys.stdout.write('[1, 2]')\n\
         print('x' * 300000, file=sys.stderr)\n\
         def f(a: int) -> int:\n    print('never called')\n    return a\n",
    );
    let loaded = p.load("  - fn: noisy:f\n    <<: *py\n").unwrap();
    assert_eq!(loaded.tools[0].params[0].ty, ParamType::Int);
}

#[test]
fn import_errors_name_file_tool_field_and_pythons_last_line() {
    let p = Project::new();
    p.module("typed", TYPED);
    p.module("broken", "def f(:\n    pass\n");
    p.module(
        "raises",
        "import json\nraise RuntimeError('cannot start: no config')\n",
    );
    let file = p.tools("").display().to_string();
    for (entry, want) in [
        (
            "  - fn: nowhere:f\n    <<: *py\n",
            "tools[1] 'nowhere:f': fn: Failed to load tool 'nowhere:f': \
             ModuleNotFoundError: No module named 'nowhere'",
        ),
        (
            "  - fn: typed:missing\n    <<: *py\n",
            "tools[1] 'typed:missing': fn: Failed to load tool 'typed:missing': \
             AttributeError: module 'typed' has no attribute 'missing'",
        ),
        (
            "  - fn: raises:f\n    name: r\n    <<: *py\n",
            "tools[1] 'r': fn: Failed to load tool 'raises:f': RuntimeError: cannot start: no config",
        ),
        (
            "  - fn: broken:f\n    <<: *py\n",
            "tools[1] 'broken:f': fn: Failed to load tool 'broken:f': SyntaxError: ",
        ),
        (
            "  - fn: typed\n    <<: *py\n",
            "tools[1] 'typed': fn: Failed to load tool 'typed': ImportError: Invalid fn path \
             'typed': use 'module:attr.attr' or 'module.attr'",
        ),
        (
            "  - fn: typed:greet\n    python: no-such-python3\n    <<: *py\n",
            "tools[1] 'typed:greet': python: Python interpreter not found: no-such-python3",
        ),
        (
            "  - fn: typed:greet\n    cwd: /nonexistent/dir\n",
            "tools[1] 'typed:greet': cwd: /nonexistent/dir is not a directory",
        ),
        (
            "  - fn: typed:greet\n    env_file: /nonexistent/x.env\n    <<: *py\n",
            "tools[1] 'typed:greet': env_file: cannot read /nonexistent/x.env: ",
        ),
    ] {
        let err = p
            .load(&format!("  - fn: typed:later\n    <<: *py\n{entry}"))
            .unwrap_err();
        let want = format!("{file}: {want}");
        assert!(err.starts_with(&want), "\n got: {err}\nwant: {want}");
    }
}

#[test]
fn one_interpreter_run_per_environment_batch() {
    let p = Project::new();
    let log = p.path().join("imports.log");
    let counting = "import os\nwith open(os.environ['IMPORT_LOG'], 'a') as f:\n    \
                    f.write('%s %d\\n' % (__name__, os.getpid()))\n\
                    def f(x: int) -> int:\n    return x\ndef g(y: str) -> str:\n    return y\n";
    p.module("count_a", counting).module("count_b", counting);
    let env = format!("IMPORT_LOG: {}", log.display());
    let loaded = p
        .load(&format!(
            "  - fn: count_a:f\n    <<: *py\n    env: {{{env}}}\n\
             \x20 - fn: count_a:g\n    <<: *py\n    env: {{{env}}}\n\
             \x20 - fn: count_b:f\n    name: bf\n    <<: *py\n    env: {{{env}}}\n\
             \x20 - fn: count_b:g\n    name: bg\n    <<: *py\n    env: {{{env}, OTHER: '1'}}\n"
        ))
        .unwrap();
    assert_eq!(loaded.tools.len(), 4);
    let lines = std::fs::read_to_string(&log).unwrap();
    let mut modules_by_run: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
    for line in lines.lines() {
        let (module, pid) = line.split_once(' ').unwrap();
        modules_by_run.entry(pid).or_default().push(module);
    }
    let mut runs: Vec<Vec<&str>> = modules_by_run.into_values().collect();
    runs.iter_mut().for_each(|r| r.sort());
    runs.sort();
    assert_eq!(
        runs,
        [vec!["count_a", "count_b"], vec!["count_b"]],
        "three tools with one env in one interpreter, the fourth (other env) in another: {lines}"
    );
}

#[test]
fn the_interpreter_gets_the_execution_environment() {
    let p = Project::new();
    p.module(
        "needs_env",
        "import os\nTOKEN = os.environ['IMPORT_NEEDS_THIS']\nassert 'NOT_ALLOWED' not in os.environ\n\
         assert os.environ['PYTHONPATH'].split(':')[0] == os.getcwd()\n\
         def f() -> str:\n    return TOKEN\n",
    );
    let introspector = Introspector {
        parent_env: vec![
            ("PATH".into(), std::env::var("PATH").unwrap()),
            ("IMPORT_NEEDS_THIS".into(), "x".into()),
            ("NOT_ALLOWED".into(), "secret".into()),
        ],
        ..Introspector::default()
    };
    let passthrough = "  - fn: needs_env:f\n    <<: *py\n    env_passthrough: ['IMPORT_NEEDS_*']\n";
    p.load_with(passthrough, &introspector).unwrap();
    let floor_only = "  - fn: needs_env:f\n    <<: *py\n";
    let err = p.load_with(floor_only, &introspector).unwrap_err();
    assert!(err.ends_with("KeyError: 'IMPORT_NEEDS_THIS'"), "{err}");
}

#[test]
fn a_hanging_import_is_killed_with_its_process_group() {
    let p = Project::new();
    let pid_file = p.path().join("child.pid");
    p.module(
        "hangs",
        &format!(
            "import subprocess, time\nchild = subprocess.Popen(['sleep', '60'])\n\
             open({:?}, 'w').write(str(child.pid))\ntime.sleep(60)\ndef f() -> str:\n    return ''\n",
            pid_file.display().to_string()
        ),
    );
    let introspector = Introspector {
        timeout: Duration::from_millis(1500),
        ..Introspector::default()
    };
    let err = p
        .load_with("  - fn: hangs:f\n    <<: *py\n", &introspector)
        .unwrap_err();
    assert!(
        err.contains("fn: Introspection subprocess failed:\ntimed out after 1.5s"),
        "{err}"
    );
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    let proc_stat = format!("/proc/{pid}/stat");
    let gone = (0..50).any(|_| {
        let state = std::fs::read_to_string(&proc_stat).unwrap_or_default();
        let dead = state.is_empty() || state.contains(") Z ");
        if !dead {
            std::thread::sleep(Duration::from_millis(100));
        }
        dead
    });
    assert!(gone, "the module's child process outlived the timeout");
}

#[test]
fn the_runner_refuses_bad_invocations_like_mccs() {
    let run = |args: &[&str]| {
        std::process::Command::new(mcc_catalog::introspect::DEFAULT_PYTHON)
            .args(args)
            .output()
            .unwrap()
    };
    let out = run(&mcc_catalog::introspect::runner_args("introspect", []));
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "usage: pyrunner.py <introspect|exec> <fn_path> [fn_path ...]\n"
    );
    let out = run(&mcc_catalog::introspect::runner_args("bogus", ["m:f"]));
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "unknown mode: 'bogus'\n"
    );
}
