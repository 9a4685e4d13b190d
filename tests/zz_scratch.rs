use glow::HasContext;
#[test]
fn ext() {
    let ctx = deepmerge::gpu::GlContext::new().unwrap();
    let e = ctx.gl.supported_extensions();
    let mut v: Vec<_> = e.iter().filter(|x| x.contains("pinned") || x.contains("external") || x.contains("memory")).collect();
    v.sort();
    println!("{v:?}");
}
