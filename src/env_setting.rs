//! Settings chosen through `DEEPMERGE_*` environment variables (measurement switches such as
//! `DEEPMERGE_GL_TRANSFER`, and the CLI's `DEEPMERGE_MALLOC`): one spelling of their choices and
//! one wording of the error that names a variable set to something else.

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
