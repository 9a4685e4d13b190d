//! Settings chosen through `DEEPMERGE_*` environment variables (measurement switches such as
//! `DEEPMERGE_GL_TRANSFER`, and the CLI's `DEEPMERGE_MALLOC`): one spelling of their choices and
//! one wording of the error that names a variable set to something else; and, for the CLI's
//! start, every setting's value checked at once ([`check_settings`]) and the `DEEPMERGE_*`
//! names it does not know ([`unknown_settings`]), so that a misspelt switch is not silently a
//! run without it.

use crate::error::{Error, Result};

/// A variable's value, if set.
pub fn env_setting(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// The setting of the variable `name` among `choices` (spelling, meaning), from
/// its value `value`: unset or empty is `None`; anything else is an error naming the variable
/// and the choices.
pub fn setting<T: Copy>(
    name: &str,
    value: Option<&str>,
    choices: &[(&str, T)],
) -> Result<Option<T>> {
    match value {
        None | Some("") => Ok(None),
        Some(v) => match choices.iter().find(|(spelling, _)| *spelling == v) {
            Some((_, meaning)) => Ok(Some(*meaning)),
            None => {
                let spellings: Vec<&str> = choices.iter().map(|(s, _)| *s).collect();
                Err(Error::Usage(format!(
                    "{name}={v} is not a setting of it; use {}",
                    spellings.join(" or ")
                )))
            }
        },
    }
}

/// Every `DEEPMERGE_*` variable deepmerge reads at run time: the settings docs/cli.md describes,
/// and the test hook that holds a temporary file open (`cleanup`).
pub const SETTINGS: &[&str] = &[
    "DEEPMERGE_AUTO_GL_MIN_BYTES",
    "DEEPMERGE_GL_BAND_CAP",
    "DEEPMERGE_GL_BUFFERS",
    "DEEPMERGE_GL_COPY_THREADS",
    "DEEPMERGE_GL_DEEP_READBACK",
    "DEEPMERGE_GL_DEEP_WRITES",
    "DEEPMERGE_GL_DEFAULTS",
    "DEEPMERGE_GL_OVERLAP",
    "DEEPMERGE_GL_PAIRWISE",
    "DEEPMERGE_GL_PINNED",
    "DEEPMERGE_GL_READER_STAGING",
    "DEEPMERGE_GL_STAGING",
    "DEEPMERGE_GL_STRICT",
    "DEEPMERGE_GL_TRANSFER",
    "DEEPMERGE_MALLOC",
    "DEEPMERGE_READ_AHEAD",
    "DEEPMERGE_TIMELINE",
    crate::cleanup::PAUSE_AFTER_TEMP_ENV,
];

/// `DEEPMERGE_*` variables the test suites and benches set for themselves (where to find the
/// binary, the data, a fuzz campaign's size), and the build's list of features (`build.rs`,
/// which cargo also sets when it runs the tests): known, though deepmerge never reads them at
/// run time.
const HARNESS_VARIABLES: &[&str] = &[
    "DEEPMERGE_CLI",
    "DEEPMERGE_DATA",
    "DEEPMERGE_FEATURES",
    "DEEPMERGE_FUZZ_MUTANTS",
    "DEEPMERGE_FUZZ_OUT",
    "DEEPMERGE_FUZZ_SEED",
    "DEEPMERGE_REGENERATE_HOSTILE",
    "DEEPMERGE_VIEW_SHOTS",
    "DEEPMERGE_VIEW_TEST_SHOTS",
];

/// The `DEEPMERGE_*` names among `names` that deepmerge does not know, each with the known
/// setting nearest to it in spelling where one is close (`DEEPMERGE_GL_TRANSFR`:
/// `DEEPMERGE_GL_TRANSFER`).
pub fn unknown_settings_among<'a>(
    names: impl IntoIterator<Item = &'a str>,
) -> Vec<(String, Option<&'static str>)> {
    let mut unknown: Vec<(String, Option<&'static str>)> = names
        .into_iter()
        .filter(|name| name.starts_with("DEEPMERGE_"))
        .filter(|name| !SETTINGS.contains(name) && !HARNESS_VARIABLES.contains(name))
        .map(|name| {
            let nearest = SETTINGS
                .iter()
                .map(|known| (strsim::damerau_levenshtein(name, known), *known))
                .min()
                // Close: a slip of a few letters, not another word.
                .filter(|&(distance, _)| distance <= 3)
                .map(|(_, known)| known);
            (name.to_string(), nearest)
        })
        .collect();
    unknown.sort();
    unknown
}

/// [`unknown_settings_among`] the environment's variables now.
pub fn unknown_settings() -> Vec<(String, Option<&'static str>)> {
    let names: Vec<String> = std::env::vars_os()
        .filter_map(|(name, _)| name.into_string().ok())
        .collect();
    unknown_settings_among(names.iter().map(String::as_str))
}

/// The one-line warning for an unknown variable `name`, naming `nearest` where there is one.
pub fn unknown_setting_warning(name: &str, nearest: Option<&str>) -> String {
    match nearest {
        Some(known) => format!(
            "{name} is not a setting deepmerge reads (did you mean {known}?); it is ignored"
        ),
        None => format!("{name} is not a setting deepmerge reads; it is ignored"),
    }
}

/// Every setting's value as the environment gives it now, checked where the run would read
/// it later: the first bad one is an error naming its variable. The CLI asks this at its
/// start, whatever it was asked to do, so that a GL setting is refused under `--backend cpu`
/// too instead of being silently a run without it.
pub fn check_settings() -> Result<()> {
    crate::stream::pipeline::read_ahead_from_env()?;
    #[cfg(feature = "gl")]
    {
        crate::backend::auto_gl_min_input_bytes()?;
        crate::gpu::check_env_settings()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_names_pass_and_slips_name_the_nearest_setting() {
        let names = [
            "DEEPMERGE_GL_TRANSFER",
            "DEEPMERGE_CLI",
            "PATH",
            "DEEPMERGE_GL_TRANSFR",
            "DEEPMERGE_TIMELNE",
            "DEEPMERGE_SOMETHING_ELSE_ENTIRELY",
        ];
        assert_eq!(
            unknown_settings_among(names),
            vec![
                (
                    "DEEPMERGE_GL_TRANSFR".to_string(),
                    Some("DEEPMERGE_GL_TRANSFER")
                ),
                ("DEEPMERGE_SOMETHING_ELSE_ENTIRELY".to_string(), None),
                ("DEEPMERGE_TIMELNE".to_string(), Some("DEEPMERGE_TIMELINE")),
            ]
        );
        assert!(
            unknown_setting_warning("DEEPMERGE_GL_TRANSFR", Some("DEEPMERGE_GL_TRANSFER"))
                .contains("did you mean DEEPMERGE_GL_TRANSFER?")
        );
    }
}
