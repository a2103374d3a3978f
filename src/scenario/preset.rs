//! Presets: a TOML file of engine settings plus a name, a description and
//! optionally the one setting an experiment varies, so what someone found
//! can be saved, shared and reproduced. The shipped presets are embedded in
//! the binary; a user's own live in `$XDG_CONFIG_HOME/readpath/presets`.
//!
//! Lookup of `NAME|FILE`: a path (anything with a `/` or ending in `.toml`)
//! is read as given; otherwise the user's directory, then the shipped set.
//! Every error starts with the file name and gives line:column and the key.

use std::fmt;
use std::path::{Path, PathBuf};

use toml::de::{DeTable, DeValue};

use crate::settings::{Settings, SettingsError, key_info, line_col};

/// The preset format this readpath reads and writes.
pub const PRESET_VERSION: i64 = 1;

/// Top-level keys of a preset that are not settings sections.
pub const RESERVED: &[&str] = &["version", "name", "description", "compare", "published"];

/// The shipped presets, embedded: (name, TOML).
pub const SHIPPED: &[(&str, &str)] = &[
    ("default", include_str!("../../presets/default.toml")),
    (
        "fsverity-bound-vs-unbound",
        include_str!("../../presets/fsverity-bound-vs-unbound.toml"),
    ),
    (
        "fscrypt-slow-cipher",
        include_str!("../../presets/fscrypt-slow-cipher.toml"),
    ),
    (
        "fscrypt-aes-instructions",
        include_str!("../../presets/fscrypt-aes-instructions.toml"),
    ),
    (
        "io_uring-qd1-iowait",
        include_str!("../../presets/io_uring-qd1-iowait.toml"),
    ),
    (
        "max-throughput",
        include_str!("../../presets/max-throughput.toml"),
    ),
    (
        "app-cold-start",
        include_str!("../../presets/app-cold-start.toml"),
    ),
];

/// The one setting an experiment varies, and its values in order.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Compare {
    /// `section.key`.
    pub key: String,
    /// The values, as `--set` would take them; the first is the reference.
    pub values: Vec<String>,
    /// Settings set beside `key` in a variant, by the variant's index
    /// (none past the end): `validate`'s kernel rounds without tracing
    /// are `workload.target = kernel` with `kernel.trace = false`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub also: Vec<Vec<(String, String)>>,
}

impl Compare {
    /// One setting's values, nothing beside it.
    pub fn of(key: &str, values: Vec<String>) -> Compare {
        Compare {
            key: key.to_string(),
            values,
            also: Vec::new(),
        }
    }

    /// The settings of each variant: `base` with `key` set to each value
    /// (and what [`Compare::also`] sets beside it).
    pub fn variants(&self, base: &Settings) -> Result<Vec<Settings>, SettingsError> {
        self.values
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let mut s = base.clone();
                s.set(&self.key, v)?;
                for (k, v) in self.also.get(i).into_iter().flatten() {
                    s.set(k, v)?;
                }
                Ok(s)
            })
            .collect()
    }

    /// Variant `i` as a reader reads it: its value, and what is set
    /// beside it (`kernel (kernel.trace = false)`).
    pub fn label(&self, i: usize) -> String {
        let v = self.values.get(i).cloned().unwrap_or_default();
        match self.also.get(i) {
            Some(also) if !also.is_empty() => format!(
                "{v} ({})",
                also.iter()
                    .map(|(k, x)| format!("{k} = {x}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            _ => v,
        }
    }

    /// Parses `KEY=V1,V2[,V3...]` (`--vary`).
    pub fn parse_vary(spec: &str, base: &Settings) -> Result<Compare, VaryError> {
        let (key, values) = spec.split_once('=').ok_or_else(|| VaryError::NoValues {
            spec: spec.to_string(),
        })?;
        let key = key.trim();
        if key_info(key).is_none() {
            let mut probe = Settings::default();
            return Err(VaryError::UnknownKey {
                key: key.to_string(),
                error: probe.set(key, "").err().map(Box::new),
            });
        }
        let values: Vec<String> = values.split(',').map(|v| v.trim().to_string()).collect();
        if values.len() < 2 || values.iter().any(String::is_empty) {
            return Err(VaryError::TooFewValues {
                spec: spec.to_string(),
                key: key.to_string(),
            });
        }
        let c = Compare::of(key, values);
        c.variants(base).map_err(VaryError::Value)?;
        Ok(c)
    }
}

/// Why a `--vary KEY=V1,V2[,V3...]` was refused: the spec, the key, or the
/// setting's own error for a value.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum VaryError {
    /// No `=`.
    #[error("--vary {spec:?}: expected KEY=V1,V2[,V3...]")]
    NoValues {
        /// The spec as written.
        spec: String,
    },
    /// A key that is not a setting: the settings' own error (with its
    /// did-you-mean) where they give one.
    #[error(
        "--vary: {}",
        match error {
            Some(e) => e.to_string(),
            None => format!("unknown setting {key:?}"),
        }
    )]
    UnknownKey {
        /// The key as written.
        key: String,
        /// The settings' error for it.
        error: Option<Box<SettingsError>>,
    },
    /// Fewer than two values, or an empty one.
    #[error("--vary {spec:?}: give at least two values, comma-separated (e.g. {key}=a,b)")]
    TooFewValues {
        /// The spec as written.
        spec: String,
        /// The key.
        key: String,
    },
    /// A value the setting refuses.
    #[error("--vary: {0}")]
    Value(#[source] SettingsError),
}

/// A preset: settings plus what they are for.
#[derive(Debug, Clone, PartialEq)]
pub struct Preset {
    /// Format version.
    pub version: i64,
    /// Short name (the file stem for saved presets).
    pub name: String,
    /// What it models and the published result, in a sentence or three.
    pub description: String,
    /// The settings; keys left out took their defaults.
    pub settings: Settings,
    /// The setting `compare` varies by default.
    pub compare: Option<Compare>,
    /// The published result the preset reproduces, if any (`[published]`).
    pub published: Option<Published>,
}

/// A published result, as a preset states it (`[published]`): the change
/// of one metric from the first value of the preset's `[compare]` to the
/// second, as the source measured it. Every verdict readpath prints is
/// computed against it ([`crate::metrics`]'s spreads, `output::verdict`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Published {
    /// Where it was published (`f959325e6ac3 (v6.3)`).
    pub source: String,
    /// The metric it is about (a name in [`crate::metrics::METRICS`]).
    pub metric: String,
    /// The change, % (lowest, highest): `[-96, -96]`, `[25, 35]`, `[-2, 2]`.
    pub change: (f64, f64),
    /// What was measured, in words, with the source's own figures.
    pub result: String,
}

/// The widest published change readpath takes, %.
pub const MAX_PUBLISHED_CHANGE: f64 = 100_000.0;

impl Published {
    /// The published direction: -1 lower, +1 higher, 0 no change (a range
    /// that spans 0).
    pub fn sign(&self) -> i8 {
        let (lo, hi) = self.change;
        if lo > 0.0 {
            1
        } else if hi < 0.0 {
            -1
        } else {
            0
        }
    }

    /// The same result seen from the other side: the change from the
    /// second value to the first (`-20..-40%` becomes `+25..+67%`).
    pub fn inverted(&self) -> Published {
        let inv = |x: f64| {
            if x <= -100.0 {
                MAX_PUBLISHED_CHANGE
            } else {
                (100.0 * 100.0 / (100.0 + x) - 100.0).min(MAX_PUBLISHED_CHANGE)
            }
        };
        Published {
            change: (inv(self.change.1), inv(self.change.0)),
            ..self.clone()
        }
    }

    /// The figure as a verdict quotes it: `-96%`, `+25..+35%`, `~0% (-2..+2%)`.
    pub fn figure(&self) -> String {
        let (lo, hi) = self.change;
        let one = |v: f64| format!("{v:+.0}%");
        if self.sign() == 0 {
            format!("~0% ({lo:+.0}..{hi:+.0}%)")
        } else if (lo - hi).abs() < 0.5 {
            one(lo)
        } else {
            // Nearer zero first: "+25..+35%", "-20..-40%".
            let (a, b) = if lo.abs() <= hi.abs() {
                (lo, hi)
            } else {
                (hi, lo)
            };
            format!("{a:+.0}..{b:+.0}%")
        }
    }
}

/// Where a preset came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// Embedded in the binary.
    Shipped,
    /// The user's preset directory.
    User(PathBuf),
    /// A path given on the command line.
    File(PathBuf),
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Shipped => f.write_str("shipped"),
            Origin::User(p) | Origin::File(p) => write!(f, "{}", p.display()),
        }
    }
}

/// Why a preset could not be found, read or written.
#[derive(Debug, thiserror::Error)]
pub enum PresetError {
    /// A settings error (already names the file, line:column and key).
    #[error(transparent)]
    Settings(#[from] SettingsError),
    /// A problem with `version`, `name`, `description` or `[compare]`.
    #[error("{origin}:{line}:{col}: {key}: {message}")]
    Field {
        /// The file.
        origin: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        col: usize,
        /// The key (`version`, `compare."workers.mode"`...).
        key: String,
        /// What is wrong and what is allowed.
        message: String,
    },
    /// No preset of that name.
    #[error(
        "no preset named {name:?}{hint}: the presets are {available} (or give a path to a .toml file)"
    )]
    NotFound {
        /// The name asked for.
        name: String,
        /// ` (did you mean "fsverity-bound-vs-unbound"?)` where one is
        /// close, else empty.
        hint: String,
        /// The names there are.
        available: String,
    },
    /// A file that could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A name that cannot be a file name.
    #[error(
        "preset name {0:?} is invalid: use letters, digits, '-', '_' and '.', not starting with '.'"
    )]
    BadName(String),
    /// A preset file that cannot be read (missing, unreadable, too large,
    /// not text): the user's input.
    #[error(transparent)]
    Input(crate::files::ReadError),
    /// Something other than a regular file where a preset is to be saved.
    #[error("{}: not a regular file: a preset is saved only as a file", path.display())]
    NotAFile {
        /// The path.
        path: PathBuf,
    },
    /// The preset could not be saved.
    #[error(transparent)]
    Output(#[from] crate::files::OutputError),
}

impl PresetError {
    /// True for every error caused by the user's input (all but I/O).
    pub fn is_bad_input(&self) -> bool {
        match self {
            PresetError::Io { .. } => false,
            PresetError::Output(e) => e.is_bad_input(),
            _ => true,
        }
    }
}

fn field(
    src: &str,
    origin: &str,
    span: std::ops::Range<usize>,
    key: &str,
    message: String,
) -> PresetError {
    let (line, col) = line_col(src, span.start);
    PresetError::Field {
        origin: origin.to_string(),
        line,
        col,
        key: key.to_string(),
        message,
    }
}

fn scalar_text(v: &DeValue<'_>) -> Option<String> {
    Some(match v {
        DeValue::String(s) => s.to_string(),
        DeValue::Integer(i) => i.as_str().to_string(),
        DeValue::Float(f) => f.as_str().to_string(),
        DeValue::Boolean(b) => b.to_string(),
        _ => return None,
    })
}

impl Preset {
    /// Reads a preset from TOML; `origin` (the file name) starts every error.
    pub fn from_toml_str(
        src: &str,
        origin: &str,
        default_name: &str,
    ) -> Result<Preset, PresetError> {
        // Syntax errors come from the settings reader, with their position.
        let doc = match DeTable::parse(src) {
            Ok(doc) => doc,
            Err(e) => {
                Settings::from_toml_str_with(src, origin, RESERVED)?;
                return Err(SettingsError::Parse {
                    origin: origin.to_string(),
                    at: None,
                    message: e.message().replace('\n', "; "),
                }
                .into());
            }
        };
        // A newer format is named as such before its keys are judged.
        if let Some((_, v)) = doc
            .get_ref()
            .iter()
            .find(|(k, _)| k.get_ref().as_ref() == "version")
        {
            check_version(src, origin, v.get_ref(), v.span())?;
        }
        let settings = Settings::from_toml_str_with(src, origin, RESERVED)?;
        let mut p = Preset {
            version: PRESET_VERSION,
            name: default_name.to_string(),
            description: String::new(),
            settings,
            compare: None,
            published: None,
        };
        let mut published_at = None;
        let mut entries: Vec<_> = doc.get_ref().iter().collect();
        entries.sort_by_key(|(k, _)| k.span().start);
        for (k, v) in entries {
            let key = k.get_ref().as_ref();
            let span = v.span();
            let string = |what: &str| match v.get_ref() {
                DeValue::String(s) => Ok(s.to_string()),
                _ => Err(field(
                    src,
                    origin,
                    span.clone(),
                    what,
                    "expected a string".into(),
                )),
            };
            match key {
                "version" => p.version = check_version(src, origin, v.get_ref(), span)?,
                "name" => p.name = crate::sys::printable(&string(key)?, false),
                "description" => p.description = crate::sys::printable(&string(key)?, true),
                "compare" => {
                    p.compare = Some(parse_compare(src, origin, v.get_ref(), span, &p.settings)?)
                }
                "published" => {
                    published_at = Some(span.clone());
                    p.published = Some(parse_published(src, origin, v.get_ref(), span)?);
                }
                _ => {}
            }
        }
        if let Some(span) = published_at
            && p.compare.is_none()
        {
            return Err(field(
                src,
                origin,
                span,
                "published",
                "a published change is from the first value of [compare] to the second: add a [compare] table".into(),
            ));
        }
        Ok(p)
    }

    /// The preset as TOML, every setting spelled out; reads back equal.
    pub fn to_toml_string(&self) -> String {
        let q = |s: &str| toml::Value::String(s.to_string()).to_string();
        let mut out = format!(
            "version = {}\nname = {}\ndescription = {}\n\n{}",
            self.version,
            q(&self.name),
            q(&self.description),
            self.settings.to_toml_string()
        );
        if let Some(c) = &self.compare {
            let values: Vec<String> = c.values.iter().map(|v| q(v)).collect();
            out.push_str(&format!(
                "\n[compare]\n{} = [{}]\n",
                q(&c.key),
                values.join(", ")
            ));
        }
        if let Some(pb) = &self.published {
            let n = |v: f64| toml::Value::Float(v).to_string();
            out.push_str(&format!(
                "\n[published]\nsource = {}\nmetric = {}\nchange = [{}, {}]\nresult = {}\n",
                q(&pb.source),
                q(&pb.metric),
                n(pb.change.0),
                n(pb.change.1),
                q(&pb.result)
            ));
        }
        out
    }
}

fn parse_published(
    src: &str,
    origin: &str,
    v: &DeValue<'_>,
    span: std::ops::Range<usize>,
) -> Result<Published, PresetError> {
    let shape = "expected a table: [published] source = \"...\", metric = \"run_delay_ms_per_s\", change = [-96, -96] (%, from the first value of [compare] to the second), result = \"...\"";
    let DeValue::Table(t) = v else {
        return Err(field(src, origin, span, "published", shape.into()));
    };
    let mut out = Published {
        source: String::new(),
        metric: String::new(),
        change: (f64::NAN, f64::NAN),
        result: String::new(),
    };
    let number = |item: &DeValue<'_>| -> Option<f64> {
        match item {
            DeValue::Integer(i) => i64::from_str_radix(i.as_str(), i.radix())
                .ok()
                .map(|n| n as f64),
            DeValue::Float(f) => f.as_str().parse().ok(),
            _ => None,
        }
    };
    for (k, val) in t.iter() {
        let key = k.get_ref().as_ref();
        let at = |m: String| field(src, origin, val.span(), &format!("published.{key}"), m);
        let text = || match val.get_ref() {
            DeValue::String(s) => Ok(crate::sys::printable(s, true)),
            _ => Err(at("expected a string".into())),
        };
        match key {
            "source" => out.source = text()?,
            "result" => out.result = text()?,
            "metric" => {
                let m = text()?;
                if crate::metrics::table::metric(&m).is_none() {
                    let names: Vec<&str> = crate::metrics::METRICS.iter().map(|m| m.name).collect();
                    return Err(at(format!(
                        "{m:?} is not a metric: allowed {}",
                        names.join(", ")
                    )));
                }
                out.metric = m;
            }
            "change" => {
                let range = format!(
                    "a change in % ({}..={}), or [lowest, highest]",
                    -100, MAX_PUBLISHED_CHANGE
                );
                let (lo, hi) = match val.get_ref() {
                    DeValue::Array(a) if a.len() == 2 => {
                        match (number(a[0].get_ref()), number(a[1].get_ref())) {
                            (Some(lo), Some(hi)) => (lo, hi),
                            _ => return Err(at(format!("expected {range}"))),
                        }
                    }
                    other => match number(other) {
                        Some(x) => (x, x),
                        None => return Err(at(format!("expected {range}"))),
                    },
                };
                let ok = |x: f64| x.is_finite() && (-100.0..=MAX_PUBLISHED_CHANGE).contains(&x);
                if !ok(lo) || !ok(hi) || lo > hi {
                    return Err(at(format!(
                        "[{lo}, {hi}] is out of range: allowed {range}, lowest first"
                    )));
                }
                out.change = (lo, hi);
            }
            other => {
                return Err(at(format!(
                    "unknown key {other:?}: allowed source, metric, change, result"
                )));
            }
        }
    }
    for (key, missing) in [
        ("source", out.source.is_empty()),
        ("metric", out.metric.is_empty()),
        ("change", out.change.0.is_nan()),
        ("result", out.result.is_empty()),
    ] {
        if missing {
            return Err(field(
                src,
                origin,
                span.clone(),
                "published",
                format!("{key} is missing; {shape}"),
            ));
        }
    }
    Ok(out)
}

fn check_version(
    src: &str,
    origin: &str,
    v: &DeValue<'_>,
    span: std::ops::Range<usize>,
) -> Result<i64, PresetError> {
    let DeValue::Integer(i) = v else {
        return Err(field(
            src,
            origin,
            span,
            "version",
            format!("expected an integer (this readpath reads version {PRESET_VERSION})"),
        ));
    };
    let n = i64::from_str_radix(i.as_str(), i.radix()).unwrap_or(i64::MAX);
    if n > PRESET_VERSION {
        return Err(field(
            src,
            origin,
            span,
            "version",
            crate::files::newer_version("preset", n, PRESET_VERSION as u32),
        ));
    }
    if n < 1 {
        return Err(field(
            src,
            origin,
            span,
            "version",
            format!("{n} is out of range: allowed 1..={PRESET_VERSION}"),
        ));
    }
    Ok(n)
}

fn parse_compare(
    src: &str,
    origin: &str,
    v: &DeValue<'_>,
    span: std::ops::Range<usize>,
    settings: &Settings,
) -> Result<Compare, PresetError> {
    let DeValue::Table(t) = v else {
        return Err(field(
            src,
            origin,
            span,
            "compare",
            "expected a table: [compare] \"section.key\" = [\"a\", \"b\"]".into(),
        ));
    };
    let entries: Vec<_> = t.iter().collect();
    if entries.len() != 1 {
        return Err(field(
            src,
            origin,
            span,
            "compare",
            format!(
                "names {} settings; a comparison varies exactly one",
                entries.len()
            ),
        ));
    }
    let (k, vals) = entries[0];
    let key = k.get_ref().as_ref();
    let at = |s: std::ops::Range<usize>, m: String| {
        field(src, origin, s, &format!("compare.{key:?}"), m)
    };
    if key_info(key).is_none() {
        let mut probe = Settings::default();
        let why = probe
            .set(key, "")
            .err()
            .map_or_else(|| "unknown setting".to_string(), |e| e.to_string());
        return Err(at(k.span(), why));
    }
    let DeValue::Array(arr) = vals.get_ref() else {
        return Err(at(
            vals.span(),
            "expected an array of at least two values".into(),
        ));
    };
    if arr.len() < 2 {
        return Err(at(
            vals.span(),
            format!(
                "has {} value(s); a comparison needs at least two",
                arr.len()
            ),
        ));
    }
    let mut values = Vec::new();
    for item in arr.iter() {
        let text = scalar_text(item.get_ref())
            .ok_or_else(|| at(item.span(), "expected a string, number or boolean".into()))?;
        let mut s = settings.clone();
        s.set(key, &text)
            .map_err(|e| at(item.span(), e.to_string()))?;
        values.push(text);
    }
    Ok(Compare::of(key, values))
}

/// The user's preset directory: `$XDG_CONFIG_HOME/readpath/presets`, else
/// `~/.config/readpath/presets`.
pub fn user_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(base.join("readpath").join("presets"))
}

fn is_path(spec: &str) -> bool {
    spec.contains('/') || spec.ends_with(".toml")
}

/// Checks a preset name is a plain file stem.
pub fn check_name(name: &str) -> Result<(), PresetError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(PresetError::BadName(name.to_string()))
    }
}

/// Reads a preset file.
pub fn load_file(path: &Path) -> Result<Preset, PresetError> {
    let src = crate::files::read_capped(path, crate::files::MAX_TEXT_INPUT)
        .map_err(PresetError::Input)?;
    let stem = path
        .file_stem()
        .map_or(String::new(), |s| s.to_string_lossy().into_owned());
    Preset::from_toml_str(&src, &path.display().to_string(), &stem)
}

/// The comparison of preset `name` (a user's or a shipped one) and the
/// published result it reproduces, when it states one.
pub fn published_of(name: &str) -> Option<(Compare, Published)> {
    let (p, _) = resolve(name).ok()?;
    Some((p.compare?, p.published?))
}

/// The shipped preset `name` (never a user's of the same name), or None.
pub fn shipped(name: &str) -> Option<Preset> {
    let (n, src) = SHIPPED.iter().find(|(n, _)| *n == name)?;
    Preset::from_toml_str(src, &format!("presets/{n}.toml"), n).ok()
}

/// Finds `NAME|FILE`: a path as given, else the user's directory, else the
/// shipped set.
pub fn resolve(spec: &str) -> Result<(Preset, Origin), PresetError> {
    if is_path(spec) {
        let p = PathBuf::from(spec);
        return Ok((load_file(&p)?, Origin::File(p)));
    }
    if let Some(dir) = user_dir() {
        let p = dir.join(format!("{spec}.toml"));
        if p.is_file() {
            return Ok((load_file(&p)?, Origin::User(p)));
        }
    }
    if let Some((name, src)) = SHIPPED.iter().find(|(n, _)| *n == spec) {
        return Ok((
            Preset::from_toml_str(src, &format!("presets/{name}.toml"), name)?,
            Origin::Shipped,
        ));
    }
    let names: Vec<String> = list().iter().map(|(n, _, _)| n.clone()).collect();
    // The closest name, as a mistyped setting gets one.
    let hint = crate::choice::did_you_mean(spec, names.iter().map(String::as_str));
    Err(PresetError::NotFound {
        name: spec.to_string(),
        hint,
        available: names.join(", "),
    })
}

/// Every preset: the user's (overriding a shipped one of the same name),
/// then the shipped ones; invalid user files are listed with their error as
/// the description.
pub fn list() -> Vec<(String, Origin, Result<Preset, PresetError>)> {
    let mut out: Vec<(String, Origin, Result<Preset, PresetError>)> = Vec::new();
    if let Some(dir) = user_dir()
        && let Ok(rd) = std::fs::read_dir(&dir)
    {
        let mut files: Vec<PathBuf> = rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "toml"))
            .collect();
        files.sort();
        for p in files {
            let name = p
                .file_stem()
                .map_or(String::new(), |s| s.to_string_lossy().into_owned());
            let r = load_file(&p);
            out.push((name, Origin::User(p), r));
        }
    }
    for (name, src) in SHIPPED {
        if out.iter().any(|(n, _, _)| n == name) {
            continue;
        }
        let r = Preset::from_toml_str(src, &format!("presets/{name}.toml"), name);
        out.push((name.to_string(), Origin::Shipped, r));
    }
    out
}

/// Where saving `name` writes.
pub fn user_path(name: &str) -> Result<PathBuf, PresetError> {
    check_name(name)?;
    let dir = user_dir().ok_or_else(|| PresetError::Io {
        path: PathBuf::from("~/.config/readpath/presets"),
        source: std::io::Error::other("neither XDG_CONFIG_HOME nor HOME is set"),
    })?;
    Ok(dir.join(format!("{name}.toml")))
}

/// Writes `preset` to `path` atomically (a temporary file in the same
/// directory, synced, then renamed over; through a symlink to the file it
/// names): a reader never sees half a file and a failure leaves any existing
/// file as it was. Anything but a regular file at `path` is refused.
pub fn save_atomic(preset: &Preset, path: &Path) -> Result<(), PresetError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|source| PresetError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let out = crate::files::OutputPath::check("preset", path, &[])?;
    if out.mode() != crate::files::Mode::Atomic {
        return Err(PresetError::NotAFile {
            path: path.to_path_buf(),
        });
    }
    out.write_all(preset.to_toml_string().as_bytes())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    /// A mistyped preset or demo name is answered as a mistyped setting
    /// is: with the closest name, and the list.
    #[test]
    fn a_mistyped_name_gets_a_did_you_mean() {
        let e = resolve("fsverity-bound-vs-unbond").unwrap_err().to_string();
        assert!(
            e.starts_with(
                "no preset named \"fsverity-bound-vs-unbond\" (did you mean \"fsverity-bound-vs-unbound\"?): the presets are "
            ),
            "{e}"
        );
        let e = resolve("zzzz").unwrap_err().to_string();
        assert!(!e.contains("did you mean"), "{e}");
        let e = crate::scenario::demo::resolve("fscrypt-slow-ciphr", 2)
            .unwrap_err()
            .to_string();
        assert!(e.contains("(did you mean \"fscrypt-slow-cipher\"?)"), "{e}");
    }

    use super::*;

    #[test]
    fn every_shipped_preset_loads_validates_and_round_trips() {
        for (name, src) in SHIPPED {
            let p = Preset::from_toml_str(src, name, name).unwrap_or_else(|e| panic!("{e}"));
            p.settings
                .validate(2)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(p.name, *name);
            assert!(!p.description.is_empty(), "{name} has no description");
            if let Some(c) = &p.compare {
                c.variants(&p.settings).unwrap();
            }
            let back = Preset::from_toml_str(&p.to_toml_string(), name, "x").unwrap();
            assert_eq!(back, p, "{name} round trip");
        }
    }

    #[test]
    fn vary_parses_and_refuses() {
        let s = Settings::default();
        let c = Compare::parse_vary("workers.mode=unbound,bound", &s).unwrap();
        assert_eq!(c.values, ["unbound", "bound"]);
        let e = Compare::parse_vary("workers.mod=a,b", &s)
            .unwrap_err()
            .to_string();
        assert!(e.contains("workers.mode"), "{e}");
        let e = Compare::parse_vary("workers.mode=unbound", &s)
            .unwrap_err()
            .to_string();
        assert!(e.contains("at least two"), "{e}");
        let e = Compare::parse_vary("workload.queue_depth=1,0", &s)
            .unwrap_err()
            .to_string();
        assert!(e.contains("1..=1024"), "{e}");
    }

    #[test]
    fn published_results_parse_and_refuse() {
        let head = "version = 1\n[compare]\n\"workers.mode\" = [\"unbound\", \"bound\"]\n";
        let ok = format!(
            "{head}[published]\nsource = \"s\"\nmetric = \"p99_us\"\nchange = -96\nresult = \"r\"\n"
        );
        let p = Preset::from_toml_str(&ok, "p.toml", "p").unwrap();
        let pb = p.published.clone().unwrap();
        assert_eq!(pb.change, (-96.0, -96.0));
        assert_eq!(pb.sign(), -1);
        assert_eq!(
            Preset::from_toml_str(&p.to_toml_string(), "q.toml", "q")
                .unwrap()
                .published,
            p.published
        );
        let bad = |body: &str| {
            Preset::from_toml_str(&format!("{head}[published]\n{body}"), "p.toml", "p")
                .unwrap_err()
                .to_string()
        };
        let e = bad("source = \"s\"\nmetric = \"latency\"\nchange = 1\nresult = \"r\"\n");
        assert!(
            e.starts_with("p.toml:6:10: published.metric: \"latency\" is not a metric: allowed"),
            "{e}"
        );
        let e = bad("source = \"s\"\nmetric = \"iops\"\nchange = [35, 25]\nresult = \"r\"\n");
        assert!(
            e.contains("published.change: [35, 25] is out of range"),
            "{e}"
        );
        let e = bad("source = \"s\"\nmetric = \"iops\"\nchange = -150\nresult = \"r\"\n");
        assert!(e.contains("out of range"), "{e}");
        let e = bad("source = \"s\"\nmetric = \"iops\"\nresult = \"r\"\n");
        assert!(e.contains("change is missing"), "{e}");
        let e = bad("source = \"s\"\nmetric = \"iops\"\nchange = 1\nresult = \"r\"\nwhen = 1\n");
        assert!(e.contains("unknown key \"when\""), "{e}");
        // A published change needs the comparison it is about.
        let e = Preset::from_toml_str(
            "version = 1\n[published]\nsource = \"s\"\nmetric = \"iops\"\nchange = 1\nresult = \"r\"\n",
            "p.toml",
            "p",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("add a [compare] table"), "{e}");
        // Seen from the other side.
        let io = Published {
            change: (-40.0, -20.0),
            ..pb
        };
        let inv = io.inverted();
        assert_eq!(inv.figure(), "+25..+67%");
        assert!((inv.inverted().change.0 - -40.0).abs() < 1e-9);
    }

    #[test]
    fn names_are_plain_file_stems() {
        assert!(check_name("my-run_2.fast").is_ok());
        for bad in ["", "../x", "a/b", ".hidden", "sp ace"] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
    }
}
