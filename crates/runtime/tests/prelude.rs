//! `use gpuport_runtime::prelude::*` (and `use gpuport_runtime::*`) let a user call methods on both tiers
//! without ambiguity: the typed tier's core traits, and the `Any*` handles' inherent
//! methods. This file compiling is most of the test.

mod with_prelude {
    use gpuport_runtime::host::HostBackend;
    use gpuport_runtime::prelude::*;

    #[test]
    fn both_tiers_resolve() -> Result<()> {
        let host = HostBackend::load(&Default::default())?.open(0)?;
        let stream = host.create_stream(StreamFlags::empty(), 0)?;
        let event = host.create_event(EventFlags::empty())?;
        stream.record(&event)?;
        event.synchronize()?;

        let rt = Runtime::discover();
        let dev: AnyDevice = rt.device("host")?;
        assert_eq!(dev.id(), host.id());
        let any_stream: AnyStream = dev.create_stream(StreamFlags::empty(), 0)?;
        let any_event: AnyEvent = dev.create_event(EventFlags::empty())?;
        any_stream.record(&any_event)?;
        any_event.synchronize()?;
        assert!(any_stream.query()?);
        Ok(())
    }
}

mod with_glob {
    use gpuport_runtime::host::HostBackend;
    use gpuport_runtime::*;

    #[test]
    fn the_glob_import_is_not_ambiguous() -> Result<()> {
        let host = HostBackend::load(&Default::default())?.open(0)?;
        let stream = host.create_stream(StreamFlags::empty(), 0)?;
        stream.synchronize()?;
        let dev = Runtime::discover().device("host")?;
        assert_eq!(dev.id(), host.id());
        Ok(())
    }
}
