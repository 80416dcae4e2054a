//! Name patterns: Python's `fnmatchcase` globs, used for environment pass-through and
//! upstream tool filters alike.

/// Case-sensitive fnmatch (`*`, `?`, `[seq]`, `[!seq]`), as Python's `fnmatchcase`.
pub fn fnmatch(pattern: &str, name: &str) -> bool {
    let options = glob::MatchOptions {
        case_sensitive: true,
        require_literal_separator: false,
        require_literal_leading_dot: false,
    };
    match glob::Pattern::new(pattern) {
        Ok(p) => p.matches_with(name, options),
        Err(_) => pattern == name,
    }
}
