//! `readpath presets`: the presets listed (the user's, then the shipped
//! ones), one shown as TOML with every default filled in, or preset files
//! checked.

use std::io::Write;

use anyhow::Result;

use crate::cli::PresetsAction;
use crate::invocation::{BadInput, preset_error};
use crate::scenario::preset;

use super::outputs::print_text;

/// `readpath presets ...`: what it says is printed whole at the end, its
/// descriptions and errors (text from preset files) with control
/// characters replaced.
pub(super) fn presets(action: PresetsAction) -> Result<()> {
    let mut out = Vec::new();
    let r = presets_into(action, &mut out);
    print_text(&String::from_utf8_lossy(&out))?;
    r
}

fn presets_into(action: PresetsAction, out: &mut Vec<u8>) -> Result<()> {
    match action {
        PresetsAction::List => {
            writeln!(
                out,
                "{:<28} {:<9} {:<10} WHAT IT RUNS (`presets show NAME`: all of it)",
                "NAME", "FROM", "READ PATH"
            )?;
            for (name, origin, p) in preset::list() {
                let (desc, path) = match &p {
                    Ok(p) => (
                        p.description.clone(),
                        crate::engine::ReadPath::of(&p.settings).short_name(),
                    ),
                    Err(e) => (format!("INVALID: {e}"), ""),
                };
                // The first sentence whole, wrapped at spaces under its
                // column: a claim is never cut (`presets show NAME` has
                // the whole description).
                let first = desc.split(". ").next().unwrap_or("").trim_end_matches('.');
                let lines = crate::tui::text::wrap_words(first, 70, 70);
                writeln!(
                    out,
                    "{name:<28} {:<9} {path:<10} {}",
                    match origin {
                        preset::Origin::Shipped => "shipped",
                        _ => "user",
                    },
                    lines[0]
                )?;
                for l in &lines[1..] {
                    writeln!(out, "{:50}{l}", "")?;
                }
            }
            if let Some(d) = preset::user_dir() {
                writeln!(
                    out,
                    "\nuser presets: {} (saved with `s` in the explorer)",
                    d.display()
                )?;
            }
        }
        PresetsAction::Show { name } => {
            let (p, origin) = preset::resolve(&name).map_err(preset_error)?;
            writeln!(out, "# {name}: {origin}")?;
            writeln!(
                out,
                "# models: {}",
                crate::engine::ReadPath::of(&p.settings).describe()
            )?;
            out.write_all(p.to_toml_string().as_bytes())?;
        }
        PresetsAction::Check { files } => {
            let mut errors = Vec::new();
            for f in &files {
                match preset::load_file(f) {
                    Ok(p) => match p
                        .settings
                        .validate(crate::sys::online_cpus().len())
                        .map_err(|e| e.to_string())
                        .and_then(|()| {
                            crate::engine::memory::check_fits(&p.settings)
                                .map_err(|e| e.to_string())
                        }) {
                        Ok(()) => writeln!(out, "{}: ok ({})", f.display(), p.name)?,
                        Err(e) => errors.push(format!("{}: {e}", f.display())),
                    },
                    Err(e) => errors.push(e.to_string()),
                }
            }
            if !errors.is_empty() {
                return Err(BadInput(errors.join("\n")).into());
            }
        }
    }
    Ok(())
}
