"""Parallel execution: a job's partitionable operators as actors in worker processes.

A materialized view created at parallelism p > 1 (`--parallelism`, or the session's
`streaming_parallelism` at CREATE, stored in the job's catalog entry) runs each of its
partitionable stateful nodes (aggregation with group keys, equi-join, grouped top-N,
partitioned window functions) as p actors, actor i on worker i mod W. Everything else
(stateless nodes, singletons, the final materialize) runs in the coordinator, the server
process, exactly as at parallelism 1.

Per epoch the coordinator splits each actor node's input by vnode (the hash the state
layout uses, `exchange`), sends every actor its part (Arrow IPC, `protocol`), the actors
step concurrently in their processes (`host.WorkerHost`) and the outputs are gathered
(`flow.ParallelOp`). At the checkpoint each actor's dirty state writes are shipped back
and applied into the coordinator's one checkpoint WriteBatch (`flow.ActorTables`), so the
epoch commits atomically across all workers and the coordinator's RocksDB stays the only
durable state; build and recovery ship each actor its tables' committed key range.

Modules: `protocol` (framing, chunk and key/value bodies, `WorkerLost`), `exchange`
(vectorized vnodes, splitting chunks), `host` (the worker side), `transport` (the worker
handle interface and the local process transport), `worker_main` (the worker process),
`pool` (the server's workers), `fragment` (which nodes are partitioned, by what keys),
`flow` (`ParallelOp`, `ActorTables`, building a parallel job).

Layering: imported by the runtime; imports `engine.stream.build`, the operators and the
state layer, never the runtime.
"""
