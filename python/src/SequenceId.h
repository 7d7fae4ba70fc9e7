//===- SequenceId.h - sequence ids as the extension takes them --*- C++ -*-===//
//
// A sequence id crosses from Python as an int or an integer that has
// __index__ (numpy's), never as a str, a float or a bool. nanobind's
// integer caster converts with int(), which reads the str "1" as 1; these
// casters refuse what operator.index refuses (a TypeError, as for any
// argument of the wrong type).
//
//===----------------------------------------------------------------------===//

#ifndef KVQ_PYTHON_SEQUENCEID_H
#define KVQ_PYTHON_SEQUENCEID_H

#include "kvq/Runtime/Cache.h"

#include <nanobind/nanobind.h>

#include <vector>

namespace kvq::python {

/// One sequence id argument.
struct SequenceIdArg {
  runtime::SequenceId Id = 0;
  operator runtime::SequenceId() const { return Id; }
};

/// A sequence of sequence ids (a list or a tuple, not a str or bytes).
struct SequenceIdsArg : std::vector<runtime::SequenceId> {};

/// Reads `o` as operator.index does, into a sequence id.
inline bool loadSequenceId(PyObject *o, runtime::SequenceId &out) noexcept {
  if (PyBool_Check(o) || !PyIndex_Check(o))
    return false;
  PyObject *index = PyNumber_Index(o);
  if (!index) {
    PyErr_Clear();
    return false;
  }
  unsigned long long value = PyLong_AsUnsignedLongLong(index);
  Py_DECREF(index);
  if (value == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
    PyErr_Clear();
    return false;
  }
  out = static_cast<runtime::SequenceId>(value);
  return true;
}

} // namespace kvq::python

namespace nanobind::detail {

template <> struct type_caster<kvq::python::SequenceIdArg> {
  NB_TYPE_CASTER(kvq::python::SequenceIdArg, const_name("int"))

  bool from_python(handle src, uint8_t, cleanup_list *) noexcept {
    return kvq::python::loadSequenceId(src.ptr(), value.Id);
  }
  static handle from_cpp(kvq::python::SequenceIdArg id, rv_policy,
                         cleanup_list *) noexcept {
    return PyLong_FromUnsignedLongLong(id.Id);
  }
};

template <> struct type_caster<kvq::python::SequenceIdsArg> {
  NB_TYPE_CASTER(kvq::python::SequenceIdsArg,
                 const_name("collections.abc.Sequence[int]"))

  bool from_python(handle src, uint8_t, cleanup_list *) noexcept {
    PyObject *o = src.ptr();
    if (PyUnicode_Check(o) || PyBytes_Check(o) || PyByteArray_Check(o) ||
        !PySequence_Check(o))
      return false;
    PyObject *items = PySequence_Fast(o, "");
    if (!items) {
      PyErr_Clear();
      return false;
    }
    Py_ssize_t size = PySequence_Fast_GET_SIZE(items);
    PyObject **item = PySequence_Fast_ITEMS(items);
    value.clear();
    bool ok = true;
    try {
      value.resize(size_t(size));
    } catch (...) {
      ok = false;
    }
    for (Py_ssize_t i = 0; ok && i < size; ++i)
      ok = kvq::python::loadSequenceId(item[i], value[size_t(i)]);
    Py_DECREF(items);
    return ok;
  }
  static handle from_cpp(const kvq::python::SequenceIdsArg &ids, rv_policy,
                         cleanup_list *) noexcept {
    PyObject *list = PyList_New(Py_ssize_t(ids.size()));
    for (size_t i = 0; list && i < ids.size(); ++i) {
      PyObject *id = PyLong_FromUnsignedLongLong(ids[i]);
      if (!id) {
        Py_DECREF(list);
        return nullptr;
      }
      PyList_SET_ITEM(list, Py_ssize_t(i), id);
    }
    return list;
  }
};

} // namespace nanobind::detail

#endif // KVQ_PYTHON_SEQUENCEID_H
