;; Imports a host function the gateway does not provide: refused at load.
(module
  (import "edgegate_v1" "teleport" (func (param i32)))
  (memory (export "memory") 1)
  (func (export "edgegate_v1_handle") (param i32) (result i64) (i64.const 0)))
