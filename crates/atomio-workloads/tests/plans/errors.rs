//! Bad parameters give a clear `WorkloadError`, never a panic.

use atomio_workloads::*;

fn err(w: Workload, clients: u32) -> WorkloadError {
    match plan(&w, clients) {
        Ok(_) => panic!("{w:?} with {clients} clients should be rejected"),
        Err(e) => e,
    }
}

fn zero(w: Workload, param: &str) {
    let e = err(w, 4);
    assert!(
        matches!(
            e,
            WorkloadError::Zero { .. } | WorkloadError::Invalid { .. }
        ),
        "{e}"
    );
    assert!(e.to_string().contains(param), "`{e}` should name {param}");
}

#[test]
fn zero_sizes_are_rejected_by_name() {
    let ior = IorParams::default;
    zero(
        Workload::IorSegmented(IorParams {
            xfer_bytes: 0,
            ..ior()
        }),
        "xfer_bytes",
    );
    zero(
        Workload::IorStrided(IorParams {
            transfers_per_block: 0,
            ..ior()
        }),
        "transfers_per_block",
    );
    zero(
        Workload::IorStrided(IorParams {
            segments: Some(0),
            ..ior()
        }),
        "segments",
    );
    let tile = TileParams::default;
    zero(
        Workload::Tile(TileParams {
            tile_x: 0,
            overlap_x: 0,
            ..tile()
        }),
        "tile_x",
    );
    zero(
        Workload::Tile(TileParams {
            tile_y: 0,
            overlap_y: 0,
            ..tile()
        }),
        "tile_y",
    );
    zero(
        Workload::Tile(TileParams {
            element_bytes: 0,
            ..tile()
        }),
        "element_bytes",
    );
    zero(
        Workload::Tile(TileParams {
            tiles_x: Some(0),
            ..tile()
        }),
        "tiles_x",
    );
    let row = RowParams::default;
    zero(
        Workload::Row(RowParams {
            width: 0,
            overlap: Some(0),
            ..row()
        }),
        "width",
    );
    zero(Workload::Row(RowParams { height: 0, ..row() }), "height");
    let s3d = S3dParams::default;
    zero(Workload::S3d(S3dParams { grid_y: 0, ..s3d() }), "grid_y");
    zero(
        Workload::S3d(S3dParams {
            components: vec![11, 0],
            ..s3d()
        }),
        "components",
    );
    zero(
        Workload::S3d(S3dParams {
            components: vec![],
            ..s3d()
        }),
        "components",
    );
    let sim = S3asimParams::default;
    zero(
        Workload::S3asim(S3asimParams {
            queries: 0,
            ..sim()
        }),
        "queries",
    );
    zero(
        Workload::S3asim(S3asimParams {
            fragments: 0,
            ..sim()
        }),
        "fragments",
    );
    zero(
        Workload::S3asim(S3asimParams {
            max_results: 0,
            min_results: 0,
            ..sim()
        }),
        "max_results",
    );
    zero(
        Workload::S3asim(S3asimParams {
            min_results: 9,
            max_results: 3,
            ..sim()
        }),
        "min_results",
    );
    let flash = FlashParams::default;
    zero(
        Workload::Flash(FlashParams {
            blocks_per_client: 0,
            ..flash()
        }),
        "blocks_per_client",
    );
    zero(
        Workload::Flash(FlashParams {
            block_edge: 0,
            ..flash()
        }),
        "block_edge",
    );
    zero(
        Workload::Flash(FlashParams {
            variables: 0,
            ..flash()
        }),
        "variables",
    );
    let reg = RegionsParams::default;
    zero(
        Workload::Regions(RegionsParams {
            regions: 0,
            ..reg()
        }),
        "regions",
    );
    zero(
        Workload::Regions(RegionsParams {
            bytes_per_client: 0,
            ..reg()
        }),
        "bytes_per_client",
    );
    let vpic = VpicParams::default;
    zero(
        Workload::Vpic(VpicParams {
            particles: 0,
            ..vpic()
        }),
        "particles",
    );
    zero(
        Workload::Vpic(VpicParams {
            iterations: Some(0),
            ..vpic()
        }),
        "iterations",
    );
}

#[test]
fn client_counts_out_of_range_are_rejected() {
    for info in WORKLOADS {
        let w = Workload::from_name::<&str>(info.name, &[]).unwrap();
        assert!(matches!(
            err(w.clone(), 0),
            WorkloadError::Clients { clients: 0, .. }
        ));
        assert!(matches!(
            err(w, MAX_CLIENTS + 1),
            WorkloadError::Clients { .. }
        ));
    }
}

#[test]
fn overflowing_sizes_are_rejected() {
    let overflow = |w: Workload, clients: u32| {
        let e = err(w, clients);
        assert!(
            matches!(
                e,
                WorkloadError::Overflow { .. } | WorkloadError::Layout { .. }
            ),
            "{e}"
        );
    };
    overflow(
        Workload::IorSegmented(IorParams {
            xfer_bytes: u64::MAX,
            ..IorParams::default()
        }),
        2,
    );
    overflow(
        Workload::IorStrided(IorParams {
            xfer_bytes: 1 << 50,
            segments: Some(1 << 10),
            ..IorParams::default()
        }),
        4,
    );
    overflow(
        Workload::Tile(TileParams {
            element_bytes: 1 << 62,
            ..TileParams::default()
        }),
        4,
    );
    overflow(
        Workload::Tile(TileParams {
            tile_x: u64::MAX,
            tile_y: u64::MAX,
            ..TileParams::default()
        }),
        4,
    );
    overflow(
        Workload::Tile(TileParams {
            header_bytes: u64::MAX - 10,
            ..TileParams::default()
        }),
        4,
    );
    overflow(
        Workload::Row(RowParams {
            element_bytes: u64::MAX / 3,
            ..RowParams::default()
        }),
        3,
    );
    overflow(
        Workload::S3d(S3dParams {
            grid_x: 1 << 30,
            grid_y: 1 << 30,
            grid_z: 1 << 30,
            ..S3dParams::default()
        }),
        8,
    );
    overflow(
        Workload::Flash(FlashParams {
            blocks_per_client: 1 << 60,
            ..FlashParams::default()
        }),
        2,
    );
    overflow(
        Workload::Regions(RegionsParams {
            bytes_per_client: 1 << 62,
            regions: 1,
            ..RegionsParams::default()
        }),
        1,
    );
    overflow(
        Workload::Vpic(VpicParams {
            particles: u64::MAX,
            ..VpicParams::default()
        }),
        2,
    );
    overflow(
        Workload::Vpic(VpicParams {
            particles: 1 << 50,
            iterations: Some(1 << 10),
            ..VpicParams::default()
        }),
        4,
    );
}

#[test]
fn plans_too_large_to_hold_are_rejected_before_allocation() {
    let e = err(
        Workload::IorStrided(IorParams {
            xfer_bytes: 1,
            transfers_per_block: 1 << 20,
            segments: Some(1 << 20),
        }),
        4,
    );
    assert!(matches!(e, WorkloadError::TooLarge { .. }), "{e}");
    let e = err(
        Workload::S3asim(S3asimParams {
            queries: 1 << 20,
            ..S3asimParams::default()
        }),
        4,
    );
    assert!(matches!(e, WorkloadError::TooLarge { .. }), "{e}");
    let e = err(
        Workload::S3asim(S3asimParams {
            max_results: 1 << 21,
            ..S3asimParams::default()
        }),
        4,
    );
    assert!(matches!(e, WorkloadError::TooLarge { .. }), "{e}");
    let e = err(
        Workload::Vpic(VpicParams {
            particles: 1,
            iterations: Some(1 << 20),
            sync: false,
        }),
        4,
    );
    assert!(matches!(e, WorkloadError::TooLarge { .. }), "{e}");
}

#[test]
fn tile_overlap_must_fit_in_the_tile() {
    let e = err(
        Workload::Tile(TileParams {
            overlap_y: 128,
            ..TileParams::default()
        }),
        4,
    );
    assert!(
        e.to_string()
            .contains("overlap_y = 128 must be smaller than tile_y = 128"),
        "{e}"
    );
    let halo = TileParams {
        overlap_mode: OverlapMode::Halo,
        overlap_x: 128,
        ..TileParams::default()
    };
    assert!(plan(&Workload::Tile(halo.clone()), 4).is_ok());
    let e = err(
        Workload::Tile(TileParams {
            overlap_x: 129,
            ..halo
        }),
        4,
    );
    assert!(e.to_string().contains("at most"), "{e}");
}
