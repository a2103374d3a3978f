//! Values as written, shared by the TOML and `--set` paths: a parsed value
//! ([`Val`]) keeps its type and spelling so an error can quote it exactly,
//! and unknown names get the closest valid one as a suggestion.

use std::ops::Range;

use super::SettingsError;

// ---------------------------------------------------------------------------
// Values as written, shared by the TOML and --set paths.

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Val {
    Str(String),
    Int(i128),
    /// As written; never used numerically.
    Float(String),
    Bool(bool),
    Datetime(String),
    Array(Vec<Val>),
    Table(Vec<Entry>),
    /// A key's "not set" (`auto`, `default`): never parsed, only stored.
    Unset,
}

/// An error and the source span of the key or value it is about.
pub(super) type SpannedError = (SettingsError, Option<Range<usize>>);

#[derive(Debug, Clone, PartialEq)]
pub(super) struct Entry {
    pub(super) key: String,
    pub(super) key_span: Option<Range<usize>>,
    pub(super) value: Val,
    pub(super) value_span: Option<Range<usize>>,
}

impl Val {
    pub(super) fn from_de(v: &toml::de::DeValue<'_>) -> Val {
        use toml::de::DeValue;
        match v {
            DeValue::String(s) => Val::Str(s.to_string()),
            DeValue::Integer(i) => {
                Val::Int(i128::from_str_radix(i.as_str(), i.radix()).unwrap_or(i128::MAX))
            }
            DeValue::Float(f) => Val::Float(f.as_str().to_string()),
            DeValue::Boolean(b) => Val::Bool(*b),
            DeValue::Datetime(d) => Val::Datetime(d.to_string()),
            DeValue::Array(a) => Val::Array(a.iter().map(|e| Val::from_de(e.get_ref())).collect()),
            DeValue::Table(t) => Val::Table(entries_from_de(t)),
        }
    }

    pub(super) fn from_toml(v: &toml::Value) -> Val {
        match v {
            toml::Value::String(s) => Val::Str(s.clone()),
            toml::Value::Integer(i) => Val::Int(i128::from(*i)),
            toml::Value::Float(f) => Val::Float(f.to_string()),
            toml::Value::Boolean(b) => Val::Bool(*b),
            toml::Value::Datetime(d) => Val::Datetime(d.to_string()),
            toml::Value::Array(a) => Val::Array(a.iter().map(Val::from_toml).collect()),
            toml::Value::Table(t) => Val::Table(entries_from_toml(t)),
        }
    }

    /// The value as it would be written in TOML.
    pub(super) fn written(&self) -> String {
        match self {
            Val::Str(s) => toml_string(s),
            Val::Int(i) => i.to_string(),
            Val::Float(s) | Val::Datetime(s) => s.clone(),
            Val::Bool(b) => b.to_string(),
            Val::Unset => String::new(),
            Val::Array(items) => {
                let items: Vec<String> = items.iter().map(Val::written).collect();
                format!("[{}]", items.join(", "))
            }
            Val::Table(entries) => {
                let items: Vec<String> = entries
                    .iter()
                    .map(|e| format!("{} = {}", e.key, e.value.written()))
                    .collect();
                if items.is_empty() {
                    "{}".to_string()
                } else {
                    format!("{{ {} }}", items.join(", "))
                }
            }
        }
    }

    /// The value with its type, for "got ..." in messages.
    pub(super) fn described(&self) -> String {
        let what = match self {
            Val::Str(_) => return self.written(),
            Val::Int(_) => "an integer",
            Val::Float(_) => "a float",
            Val::Bool(_) => "a boolean",
            Val::Datetime(_) => "a datetime",
            Val::Array(_) => "an array",
            Val::Table(_) => "a table",
            Val::Unset => "nothing",
        };
        format!("{what} ({})", self.written())
    }
}

pub(super) fn toml_string(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

pub(super) fn entries_from_de(table: &toml::de::DeTable<'_>) -> Vec<Entry> {
    let mut entries: Vec<Entry> = table
        .iter()
        .map(|(k, v)| Entry {
            key: k.get_ref().to_string(),
            key_span: Some(k.span()),
            value: Val::from_de(v.get_ref()),
            value_span: Some(v.span()),
        })
        .collect();
    // Report the first problem in file order.
    entries.sort_by_key(|e| e.key_span.as_ref().map_or(0, |s| s.start));
    entries
}

pub(super) fn entries_from_toml(table: &toml::Table) -> Vec<Entry> {
    table
        .iter()
        .map(|(k, v)| Entry {
            key: k.clone(),
            key_span: None,
            value: Val::from_toml(v),
            value_span: None,
        })
        .collect()
}

// ---------------------------------------------------------------------------
// Suggestions for unknown names.

pub(super) use crate::choice::closest;

// ---------------------------------------------------------------------------
// Per-kind value checks.

pub(super) fn wrong_type(key: &str, v: &Val, expected: String) -> SettingsError {
    SettingsError::WrongType {
        key: key.to_string(),
        value: v.written(),
        expected,
        got: v.described(),
    }
}
