//! Which channels a reader keeps (`--channels`, Python's `channels=`): the names asked for
//! and the rule that adds what the asked-for channels need to be merged correctly.

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
            return Err(Error::Usage(
                "--channels needs at least one channel name".into(),
            ));
        }
        Ok(ChannelSelection { names })
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
