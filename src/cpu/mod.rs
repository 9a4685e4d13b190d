//! CPU twins of the GPU stages (docs/architecture.md, "CPU twins"): the same names, the same
//! constants and the same arithmetic as the shaders in `glsl/`, written as plain loops.
//!
//! They are the oracle the GL tests compare against, element by element; the engine never
//! calls them. The names both engines share ([`crate::vocab`]: layouts, fragments, stage
//! constants) live outside this module, so that neither engine depends on the other.

pub mod build;
pub mod compact;
pub mod gather;
pub mod merge;
pub mod relayout;
pub mod scan;
pub mod sort;
pub mod sources;
pub mod tidy;
