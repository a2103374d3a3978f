//! A closed set of named values, written once.
//!
//! Most settings take one of a few words (`bound`, `unbound`, `inline`), and
//! so does the cipher, which lives in [`crate::crypto`] below the settings.
//! [`named_enum!`] turns one list of `Variant => "name"` pairs into the enum,
//! its names in cycle order, `next`/`prev` (what a key and Alt+key step
//! through), `Display`, `FromStr` and serde, and implements [`Choice`], the
//! trait the settings table reads a choice's allowed values from. It sits at
//! the bottom of the crate so that every layer can name its choices this way.

/// How alike a mistyped name and a candidate must be to suggest it
/// (Jaro-Winkler).
const CLOSE: f64 = 0.85;

/// The candidate closest to `input` where one is close enough: what a
/// mistyped setting, value, preset or demo is answered with ("did you
/// mean"). Case, `-` and `_` do not count.
pub fn closest<'a>(input: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let norm = |s: &str| s.to_ascii_lowercase().replace('-', "_");
    let input = norm(input);
    candidates
        .into_iter()
        .map(|c| (strsim::jaro_winkler(&input, &norm(c)), c))
        .filter(|(score, _)| *score >= CLOSE)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

/// ` (did you mean "NAME"?)` for the candidate [`closest`] to `input`,
/// else empty: the tail of a "no such name" error.
pub fn did_you_mean<'a>(input: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    closest(input, candidates).map_or(String::new(), |c| format!(" (did you mean {c:?}?)"))
}

/// Why a name is none of a closed set's values (the `FromStr` error of a
/// [`named_enum!`]): the name as written and what is allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{value:?} is not one of {allowed}")]
pub struct NotAChoice {
    /// The name as written.
    pub value: String,
    /// The allowed names, joined with ", ".
    pub allowed: String,
}

/// A set of named choices: the enums the settings take and [`crate::crypto::CipherKind`].
pub trait Choice: Copy + PartialEq + 'static {
    /// Every value, in cycle order.
    fn choices() -> &'static [Self];
    /// The value's name, as TOML and the command line write it.
    fn choice_name(self) -> &'static str;

    /// The names joined with ", " (what an error says is allowed).
    fn allowed_list() -> String {
        Self::choices()
            .iter()
            .map(|c| c.choice_name())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The value named `s` (any case, surrounding blanks ignored).
    fn lookup(s: &str) -> Option<Self> {
        Self::choices()
            .iter()
            .copied()
            .find(|c| c.choice_name().eq_ignore_ascii_case(s.trim()))
    }
}

/// Defines an enum of named values: `Name { Variant => "name", ... }`,
/// with attributes and doc comments on the enum and on each variant.
#[macro_export]
macro_rules! named_enum {
    (
        $(#[$meta:meta])*
        $name:ident { $($(#[$vmeta:meta])* $variant:ident => $text:literal),+ $(,)? }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
        pub enum $name {
            $($(#[$vmeta])* #[serde(rename = $text)] $variant),+
        }

        impl $name {
            /// Every value, in the order [`Self::next`] cycles through.
            pub const ALL: [$name; [$($text),+].len()] = [$($name::$variant),+];

            /// Every value's name, in [`Self::ALL`] order.
            pub const NAMES: [&'static str; [$($text),+].len()] = [$($text),+];

            /// The string used in TOML and on the command line.
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }

            /// The next value in [`Self::ALL`] order, wrapping around.
            pub fn next(self) -> Self {
                let i = Self::ALL.iter().position(|&v| v == self).unwrap_or(0);
                Self::ALL[(i + 1) % Self::ALL.len()]
            }

            /// The previous value in [`Self::ALL`] order, wrapping around
            /// (what Alt+key steps to in the explorer).
            pub fn prev(self) -> Self {
                let i = Self::ALL.iter().position(|&v| v == self).unwrap_or(0);
                Self::ALL[(i + Self::ALL.len() - 1) % Self::ALL.len()]
            }
        }

        impl $crate::choice::Choice for $name {
            fn choices() -> &'static [Self] {
                &Self::ALL
            }
            fn choice_name(self) -> &'static str {
                self.name()
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.pad(self.name())
            }
        }

        impl std::str::FromStr for $name {
            type Err = $crate::choice::NotAChoice;

            fn from_str(s: &str) -> Result<Self, $crate::choice::NotAChoice> {
                <Self as $crate::choice::Choice>::lookup(s).ok_or_else(|| {
                    $crate::choice::NotAChoice {
                        value: s.to_string(),
                        allowed: <Self as $crate::choice::Choice>::allowed_list(),
                    }
                })
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::Choice;

    crate::named_enum! {
        /// A test enum.
        Fruit { Apple => "apple", Pear => "pear", Fig => "fig" }
    }

    #[test]
    fn one_list_gives_names_cycle_and_parsing() {
        assert_eq!(Fruit::NAMES, ["apple", "pear", "fig"]);
        assert_eq!(Fruit::Fig.next(), Fruit::Apple);
        assert_eq!(Fruit::Apple.prev(), Fruit::Fig);
        assert_eq!(" PEAR ".parse::<Fruit>(), Ok(Fruit::Pear));
        assert_eq!(
            "kiwi".parse::<Fruit>().unwrap_err().to_string(),
            "\"kiwi\" is not one of apple, pear, fig"
        );
        assert_eq!(Fruit::allowed_list(), "apple, pear, fig");
        assert_eq!(format!("{:>6}", Fruit::Fig), "   fig");
        assert_eq!(serde_json::to_string(&Fruit::Pear).unwrap(), "\"pear\"");
    }
}
