//! Why settings could not be read, set or validated: one error type whose
//! every message names the key, the value as written and what is allowed,
//! and for a file starts with `file:line:column` (a preset's error points
//! at the character a user must change).

/// Why settings could not be read, set or validated. `Display` is one line.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SettingsError {
    /// A key that is not a setting.
    #[error("{}", unknown_message("setting", key, suggestion, allowed))]
    UnknownKey {
        /// The key as written (`section.key`, or a bare top-level key).
        key: String,
        /// The closest valid key, if one is close.
        suggestion: Option<String>,
        /// What is valid there, as a phrase ("valid keys in [workers] are ...").
        allowed: String,
    },
    /// A TOML table that is not a section.
    #[error("{}", unknown_message("section", section, suggestion, allowed))]
    UnknownSection {
        section: String,
        suggestion: Option<String>,
        allowed: String,
    },
    /// A value of the wrong type (a string where an integer belongs...).
    #[error("{key}: expected {expected}, got {got}")]
    WrongType {
        key: String,
        /// The value as written (TOML form).
        value: String,
        /// What was expected, including the allowed values.
        expected: String,
        /// The value with its type ("a boolean (true)", or a quoted string).
        got: String,
    },
    /// A number outside its range.
    #[error("{key} = {value} is out of range: allowed {allowed}")]
    OutOfRange {
        key: String,
        value: String,
        allowed: String,
    },
    /// A value of the right type that is not allowed.
    #[error("{key} = {value} is invalid: {reason}")]
    Invalid {
        key: String,
        value: String,
        /// The whole explanation, allowed values included.
        reason: String,
        allowed: String,
    },
    /// A `--set` argument that is not `section.key=value`.
    #[error("--set {spec:?}: {reason}")]
    BadOverride { spec: String, reason: String },
    /// The TOML parser's own error (syntax, duplicate keys).
    #[error("{}{message}", position_prefix(origin, at))]
    Parse {
        origin: String,
        /// 1-based line and column.
        at: Option<(usize, usize)>,
        message: String,
    },
    /// An error found in a file, with where it was found.
    #[error("{}{error}", position_prefix(origin, at))]
    Located {
        origin: String,
        /// 1-based line and column of the offending key or value.
        at: Option<(usize, usize)>,
        error: Box<SettingsError>,
    },
}

fn unknown_message(what: &str, name: &str, suggestion: &Option<String>, allowed: &str) -> String {
    match suggestion {
        Some(s) => format!("unknown {what} {name:?} (did you mean {s:?}?)"),
        None => format!("unknown {what} {name:?}: {allowed}"),
    }
}

fn position_prefix(origin: &str, at: &Option<(usize, usize)>) -> String {
    match at {
        Some((line, col)) => format!("{origin}:{line}:{col}: "),
        None => format!("{origin}: "),
    }
}

impl SettingsError {
    /// The key the error is about (`section.key`, or a section name).
    pub fn key(&self) -> Option<&str> {
        match self {
            SettingsError::UnknownKey { key, .. }
            | SettingsError::WrongType { key, .. }
            | SettingsError::OutOfRange { key, .. }
            | SettingsError::Invalid { key, .. } => Some(key),
            SettingsError::UnknownSection { section, .. } => Some(section),
            SettingsError::Located { error, .. } => error.key(),
            SettingsError::BadOverride { .. } | SettingsError::Parse { .. } => None,
        }
    }

    /// The offending value as written, where there is one.
    pub fn value(&self) -> Option<&str> {
        match self {
            SettingsError::WrongType { value, .. }
            | SettingsError::OutOfRange { value, .. }
            | SettingsError::Invalid { value, .. } => Some(value),
            SettingsError::Located { error, .. } => error.value(),
            _ => None,
        }
    }

    /// What is allowed instead, where that is known.
    pub fn allowed(&self) -> Option<&str> {
        match self {
            SettingsError::UnknownKey { allowed, .. }
            | SettingsError::UnknownSection { allowed, .. }
            | SettingsError::OutOfRange { allowed, .. }
            | SettingsError::Invalid { allowed, .. } => Some(allowed),
            SettingsError::WrongType { expected, .. } => Some(expected),
            SettingsError::Located { error, .. } => error.allowed(),
            _ => None,
        }
    }
}

/// 1-based line and column (in characters) of byte `offset` in `src`.
pub fn line_col(src: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(src.len());
    while !src.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &src[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[line_start..].chars().count() + 1)
}
