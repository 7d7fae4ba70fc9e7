//===- ChannelTables.cpp - reorder and clip tables in kernels -------------===//

#include "ChannelTables.h"

using namespace mlir;
using namespace kvq;

bool kvq::hasChannelTables(const SliceLayout &slice) {
  return slice.isQuantized() &&
         (slice.hasReorder() || slice.quant.getClipTable());
}

ChannelTables::ChannelTables(KernelBuilder &kb, const CacheLayout &layout,
                             const KernelLayers &layers, bool isKeys,
                             Value head, TableLoad load)
    : kb(kb), load(std::move(load)),
      slice(layout.get(isKeys).layers[layers.first()]), layers(layers),
      kvHeads(layout.model.getKvHeads()), dim(layout.model.getHeadDim()),
      groups(slice.quant && slice.quant.getSpan() == Span::Channels
                 ? slice.GroupsPerToken
                 : dim),
      prefix(isKeys ? "keys" : "values"), head(head) {
  if (!this->load)
    this->load = [&kb](StringRef name, Value index,
                       function_ref<SmallVector<int32_t>()> build) {
      Value table = kb.getTarget().getConstantTable(kb, name, build());
      return kb.loadU32(table, index, /*invariant=*/true);
    };
  // Layers share a kernel only where their schemes, and so the tables'
  // shapes, are equal (planKernels).
  for (int64_t layer : layers.layers) {
    const SliceLayout &own = layout.get(isKeys).layers[layer];
    SliceTables rows = getSliceTables(own, layout.model, unsigned(layer));
    tables.perm.append(rows.perm);
    tables.sizes.append(rows.sizes);
    tables.clips.append(rows.clips);
    groupWords.append(own.GroupWords.begin(), own.GroupWords.end());
  }
}

bool ChannelTables::hasClipTable() const { return !tables.clips.empty(); }

Value ChannelTables::lookup(StringRef name, unsigned rowLength, Value index,
                            function_ref<SmallVector<int32_t>()> build) {
  // A kernel of one layer has one row a kv-head.
  Value row = head;
  if (layers.layers.size() > 1)
    row = kb.add(kb.mul(layers.row, kb.i32(kvHeads)), head);
  return load((prefix + "_" + name).str(),
              kb.add(kb.mul(row, kb.i32(rowLength)), index), build);
}

Value ChannelTables::channelAt(Value position) {
  return lookup("perm", dim, position, [&] { return tables.perm; });
}

Value ChannelTables::positionOf(Value channel) {
  return lookup("position", dim, channel, [&] {
    ArrayRef<int32_t> perm = tables.perm;
    SmallVector<int32_t> position(perm.size());
    for (size_t i = 0; i < perm.size(); ++i)
      position[i / dim * dim + perm[i]] = int32_t(i % dim);
    return position;
  });
}

Value ChannelTables::groupOf(Value position) {
  return lookup("group_of", dim, position, [&] {
    SmallVector<int32_t> groupOf;
    for (auto [index, size] : llvm::enumerate(tables.sizes))
      groupOf.append(size, int32_t(index % groups));
    return groupOf;
  });
}

Value ChannelTables::groupStart(Value g) {
  return lookup("group_start", groups, g, [&] {
    ArrayRef<int32_t> sizes = tables.sizes;
    SmallVector<int32_t> starts;
    for (size_t i = 0; i < sizes.size(); ++i)
      starts.push_back(i % groups == 0 ? 0 : starts.back() + sizes[i - 1]);
    return starts;
  });
}

Value ChannelTables::groupSize(Value g) {
  return lookup("group_size", groups, g, [&] { return tables.sizes; });
}

Value ChannelTables::groupWord(Value g) {
  return lookup("group_word", groups, g, [&] { return groupWords; });
}

Value ChannelTables::clipFactor(Value g) {
  Value bits = lookup("clip", groups, g, [&] {
    return llvm::map_to_vector(tables.clips, [](float clip) {
      return int32_t(llvm::bit_cast<uint32_t>(clip));
    });
  });
  return kb.bitcast(kb.builder().getF32Type(), bits);
}
