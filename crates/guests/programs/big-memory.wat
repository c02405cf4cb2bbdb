;; Starts with 4 MiB of memory: more than the default 2 MiB limit, so it is refused at load.
(module
  (memory (export "memory") 64)
  (func (export "edgegate_v1_handle") (param i32) (result i64) (i64.const 0)))
