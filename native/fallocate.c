/*
 * ferry's one native helper: fallocate(2), which Node does not expose.
 * Preallocating a segment makes a full file system fail at segment creation
 * rather than in the middle of a record, without writing (and later waiting
 * on the write-back of) a file's worth of zeros.
 *
 * allocate(fd, offset, length) returns 0 or the errno of the failure;
 * ENOSYS where the platform has no fallocate, so the caller can fall back.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <node_api.h>
#include <errno.h>
#include <fcntl.h>

static napi_value allocate(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value args[3];
  int32_t fd = -1;
  double offset = 0, length = 0;
  int err = 0;
  napi_value result;

  if (napi_get_cb_info(env, info, &argc, args, NULL, NULL) != napi_ok || argc < 3 ||
      napi_get_value_int32(env, args[0], &fd) != napi_ok ||
      napi_get_value_double(env, args[1], &offset) != napi_ok ||
      napi_get_value_double(env, args[2], &length) != napi_ok) {
    napi_throw_type_error(env, NULL, "allocate(fd, offset, length) expects three numbers");
    return NULL;
  }
#if defined(__linux__)
  int rc;
  do {
    rc = fallocate(fd, 0, (off_t)offset, (off_t)length);
  } while (rc != 0 && errno == EINTR);
  err = rc == 0 ? 0 : errno;
#else
  err = ENOSYS;
#endif
  napi_create_int32(env, err, &result);
  return result;
}

static napi_value init(napi_env env, napi_value exports) {
  napi_value fn;
  napi_create_function(env, "allocate", NAPI_AUTO_LENGTH, allocate, NULL, &fn);
  napi_set_named_property(env, exports, "allocate", fn);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
