//! Every rank adds its array into everyone's: `mpiexec -n 4 cargo run --example allreduce`
//! (or the built binary under `mpiexec -n 4`). Each rank checks the sum against what it
//! knows every rank contributed and prints one line.

use std::process::ExitCode;

use gpuport::collective::{Communicator, ReduceOp};
use gpuport::{Array, Runtime};

fn run() -> gpuport::Result<String> {
    let rt = Runtime::discover();
    let world = Communicator::world()?;
    let (rank, size) = (world.rank(), world.size());
    let dev = rt.default_device()?;
    // Rank r contributes r + 1 in every element: the sum is size × (size + 1) / 2.
    let n = 1 << 20;
    let x = Array::from_slice(&dev, &vec![(rank + 1) as f32; n], &[n])?;
    world.all_reduce(&x, ReduceOp::Sum, None, None)?.wait()?;
    let want = (size * (size + 1) / 2) as f32;
    let got = x.to_vec::<f32>()?;
    if got.iter().any(|&v| v != want) {
        return Err(gpuport::Error::invalid_argument(format!("rank {rank}: expected {want} everywhere")));
    }
    Ok(format!(
        "rank {rank} of {size}: all_reduce of {n} f32 on {} verified (every element {want}) — {}",
        dev.id(),
        world.engine_version()
    ))
}

fn main() -> ExitCode {
    match run() {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("allreduce: {e}");
            ExitCode::FAILURE
        }
    }
}
