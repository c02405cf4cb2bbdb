;; A component that imports wasi:filesystem, which edgegate does not link: refused at load,
;; by the import's name. (It exports nothing a gateway could call, either.)
(component
  (import "wasi:filesystem/types@0.2.6" (instance))
)
