//! Which channels a reader keeps (`--channels`, Python's `channels=`): the names asked for
//! and the rule that adds what the asked-for channels need to be merged correctly.

use std::path::Path;

use crate::deep::{Channel, ChannelRole};
use crate::error::{Error, Result};

/// The channels `--channels` asks for. Z and ZBack are always kept (they order the samples);
/// every alpha channel (A, RA, GA, BA, in any layer) is kept when a composited channel is, since
/// the colour's "over" needs it; other channels are kept only when named.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChannelSelection {
    names: Vec<String>,
}

impl ChannelSelection {
    /// From a comma-separated list such as `R,G,B,A`.
    pub fn parse(list: &str) -> Result<Self> {
        let names: Vec<String> = list
            .split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(String::from)
            .collect();
        if names.is_empty() {
            return Err(Error::Usage("the channel list names no channel".into()));
        }
        Ok(ChannelSelection { names })
    }

    /// Refuse a name that no input has, listing the channels the inputs do have (`inputs`: each
    /// input's path and channels), so a typo or a wrong case (`b` for `B`) is never dropped in
    /// silence. A name one input has is enough: inputs need not share their channels.
    pub fn check_names(&self, inputs: &[(&Path, &[Channel])]) -> Result<()> {
        let Some(missing) = self.names.iter().find(|n| {
            !inputs
                .iter()
                .any(|(_, all)| all.iter().any(|c| &c.name == *n))
        }) else {
            return Ok(());
        };
        let mut have: Vec<&str> = Vec::new();
        for c in inputs.iter().flat_map(|(_, all)| all.iter()) {
            if !have.contains(&c.name.as_str()) {
                have.push(&c.name);
            }
        }
        let message = match inputs {
            [(path, _)] => format!(
                "{}: no channel {missing:?} (its channels: {})",
                path.display(),
                have.join(", ")
            ),
            _ => format!(
                "no input has a channel {missing:?} (the inputs' channels: {})",
                have.join(", ")
            ),
        };
        Err(Error::Usage(message))
    }

    /// This selection as it applies to one input whose channels are `all`: the names it has
    /// (after [`Self::check_names`] over every input, a name only another input has is no error).
    pub fn restricted_to(&self, all: &[Channel]) -> ChannelSelection {
        ChannelSelection {
            names: self
                .names
                .iter()
                .filter(|n| all.iter().any(|c| &c.name == *n))
                .cloned()
                .collect(),
        }
    }

    /// The names asked for.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Whether `channel` of an input whose channels are `all` is kept.
    pub fn keeps(&self, channel: &Channel, all: &[Channel]) -> bool {
        let named = |c: &Channel| self.names.iter().any(|n| n == &c.name);
        let is_alpha = |c: &Channel| {
            matches!(
                c.role,
                ChannelRole::Alpha
                    | ChannelRole::RedAlpha
                    | ChannelRole::GreenAlpha
                    | ChannelRole::BlueAlpha
            )
        };
        match channel.role {
            ChannelRole::Z | ChannelRole::ZBack => true,
            _ if named(channel) => true,
            _ if is_alpha(channel) => all.iter().any(|c| {
                named(c)
                    && !matches!(
                        c.role,
                        ChannelRole::Z | ChannelRole::ZBack | ChannelRole::Id
                    )
            }),
            _ => false,
        }
    }
}
