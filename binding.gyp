{
  "targets": [
    {
      "target_name": "ferry_native",
      "sources": ["native/fallocate.c"]
    }
  ]
}
