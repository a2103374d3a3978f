//! A setting's name as a type: [`Key`], made only by [`key!`], which names
//! the field it sets (`key!(workload.sleep)`), so a key misspelt anywhere
//! in the code does not compile, where a string would silently match
//! nothing (a resolver rule whose key matches no setting drops its
//! notice). The table's own names ([`super::Setting::key`]) come from the
//! same fields; a test holds every key the code names to a setting of the
//! table.

/// A setting's `section.name`, proven at compile time to be a field of
/// [`super::Settings`] ([`key!`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key(&'static str);

impl Key {
    /// For [`key!`] only: `name` is `section.field` of a field the macro
    /// has checked.
    #[doc(hidden)]
    pub const fn checked(name: &'static str) -> Key {
        Key(name)
    }

    /// `section.name`, as TOML, `--set` and the messages spell it.
    pub const fn name(self) -> &'static str {
        self.0
    }
}

impl std::ops::Deref for Key {
    type Target = str;
    fn deref(&self) -> &str {
        self.0
    }
}

impl AsRef<str> for Key {
    fn as_ref(&self) -> &str {
        self.0
    }
}

impl std::fmt::Display for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl PartialEq<str> for Key {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for Key {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

/// The [`Key`] of setting `section.name`; a name that is no field of
/// [`Settings`](crate::settings::Settings) does not compile.
#[macro_export]
macro_rules! key {
    ($section:ident . $name:ident) => {{
        const _: usize = ::core::mem::offset_of!($crate::settings::Settings, $section.$name);
        $crate::settings::Key::checked(concat!(stringify!($section), ".", stringify!($name)))
    }};
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_its_setting() {
        const SLEEP: Key = key!(workload.sleep);
        assert_eq!(SLEEP.name(), "workload.sleep");
        assert_eq!(SLEEP.setting().key, "workload.sleep");
        assert_eq!(SLEEP, "workload.sleep");
        assert_eq!(key!(kernel.limit_cache).to_string(), "kernel.limit_cache");
    }
}
