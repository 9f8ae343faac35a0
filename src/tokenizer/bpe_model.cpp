// The BPE merge model (HF tokenizers' algorithm on one pre-token) and the word cache in front of it.
#include <algorithm>
#include <cstring>

#include "tokenizer/bpe_internal.hpp"

namespace shardft::bpe {

// ---- MergeMap --------------------------------------------------------------------------------

namespace {

std::uint64_t pair_key(std::int32_t left, std::int32_t right) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(left)) << 32) | static_cast<std::uint32_t>(right);
}

std::size_t mix(std::uint64_t k) {  // splitmix64 finaliser
  k ^= k >> 30;
  k *= 0xbf58476d1ce4e5b9ull;
  k ^= k >> 27;
  k *= 0x94d049bb133111ebull;
  k ^= k >> 31;
  return static_cast<std::size_t>(k);
}

}  // namespace

void MergeMap::reserve(std::size_t n) {
  std::size_t want = 16;
  while (want < 2 * n) want *= 2;
  if (want <= slots_.size()) return;
  std::vector<Slot> old;
  old.swap(slots_);
  slots_.assign(want, Slot{kEmpty, {0, 0}});
  size_ = 0;
  for (const Slot& s : old) {
    if (s.key != kEmpty)
      insert(static_cast<std::int32_t>(s.key >> 32), static_cast<std::int32_t>(s.key & 0xffffffffu), s.value.rank,
             s.value.merged);
  }
}

void MergeMap::grow() { reserve(std::max<std::size_t>(16, slots_.size())); }

void MergeMap::insert(std::int32_t left, std::int32_t right, std::uint32_t rank, std::int32_t merged) {
  if (2 * (size_ + 1) > slots_.size()) grow();
  const std::uint64_t key = pair_key(left, right);
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t i = mix(key) & mask;; i = (i + 1) & mask) {
    if (slots_[i].key == key) {
      slots_[i].value = {rank, merged};  // a repeated merge: the later line wins, as in HF's HashMap
      return;
    }
    if (slots_[i].key == kEmpty) {
      slots_[i] = Slot{key, {rank, merged}};
      ++size_;
      return;
    }
  }
}

const MergeMap::Value* MergeMap::find(std::int32_t left, std::int32_t right) const {
  if (slots_.empty()) return nullptr;
  const std::uint64_t key = pair_key(left, right);
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t i = mix(key) & mask;; i = (i + 1) & mask) {
    if (slots_[i].key == key) return &slots_[i].value;
    if (slots_[i].key == kEmpty) return nullptr;
  }
}

// ---- BpeModel --------------------------------------------------------------------------------

void BpeModel::byte_symbols(std::string_view word, MergeScratch& scratch) const {
  // One symbol per byte (each byte is one character of the byte-level alphabet). A byte without a token
  // becomes unk (consecutive ones fused when fuse_unk) or, without an unk token, is dropped: its length
  // goes to the next symbol so that the lengths still cover the word.
  auto& syms = scratch.symbols;
  std::uint32_t pending = 0;  // dropped bytes not yet attached to a symbol
  bool last_is_unk = false;
  for (unsigned char b : word) {
    const std::int32_t id = byte_id[b];
    if (id >= 0) {
      syms.push_back({id, 0, 0, 1 + pending});
      pending = 0;
      last_is_unk = false;
    } else if (unk_id >= 0) {
      if (fuse_unk && last_is_unk) {
        syms.back().len += 1 + pending;
      } else {
        syms.push_back({unk_id, 0, 0, 1 + pending});
      }
      pending = 0;
      last_is_unk = true;
    } else {
      ++pending;
    }
  }
  if (!syms.empty()) syms.back().len += pending;
}

void BpeModel::char_symbols(std::string_view word, MergeScratch& scratch) const {
  // HF's merge_word: a character in the vocab is a symbol; else, with byte_fallback, its bytes' <0xNN>
  // tokens when all of them exist; else unk. The unk waits until the next character that is in the vocab
  // (or the end), so that fuse_unk can extend it: a character that falls back to bytes in between goes
  // before it, as in HF. Without an unk token the character is dropped and its bytes go to the next
  // symbol, so that the lengths still cover the word.
  auto& syms = scratch.symbols;
  std::uint32_t pending = 0;
  std::int32_t unk_len = -1;  // the waiting unk's bytes, -1 when none waits
  const auto push = [&](std::int32_t id, std::uint32_t len) {
    syms.push_back({id, 0, 0, len + pending});
    pending = 0;
  };
  for (std::size_t i = 0; i < word.size();) {
    const std::size_t begin = i;
    const char32_t c = next_code_point(word, i);
    const auto len = static_cast<std::uint32_t>(i - begin);
    std::int32_t id = -1;
    if (c < 128) {
      id = ascii_id[c];
    } else if (const auto it = char_id.find(c); it != char_id.end()) {
      id = it->second;
    }
    if (id >= 0) {
      if (unk_len >= 0) push(unk_id, static_cast<std::uint32_t>(unk_len));
      unk_len = -1;
      push(id, len);
      continue;
    }
    if (byte_fallback) {
      bool all = true;
      for (std::size_t k = begin; k < i; ++k) all = all && fallback_id[static_cast<unsigned char>(word[k])] >= 0;
      if (all) {
        for (std::size_t k = begin; k < i; ++k) push(fallback_id[static_cast<unsigned char>(word[k])], 1);
        continue;
      }
    }
    if (unk_id < 0) {
      pending += len;
    } else if (unk_len < 0) {
      unk_len = static_cast<std::int32_t>(len);
    } else if (fuse_unk) {
      unk_len += static_cast<std::int32_t>(len);
    } else {
      push(unk_id, static_cast<std::uint32_t>(unk_len));
      unk_len = static_cast<std::int32_t>(len);
    }
  }
  if (unk_len >= 0) push(unk_id, static_cast<std::uint32_t>(unk_len));
  if (!syms.empty()) syms.back().len += pending;
}

void BpeModel::tokenize(std::string_view word, MergeScratch& scratch, std::vector<std::int32_t>& ids,
                        std::vector<std::uint32_t>& lens) const {
  if (word.empty()) return;
  if (ignore_merges) {
    const auto it = word_ids.find(std::string(word));
    if (it != word_ids.end()) {
      ids.push_back(it->second);
      lens.push_back(static_cast<std::uint32_t>(word.size()));
      return;
    }
  }
  auto& syms = scratch.symbols;
  syms.clear();
  if (byte_level) {
    byte_symbols(word, scratch);
  } else {
    char_symbols(word, scratch);
  }
  if (syms.empty()) return;
  const auto n = static_cast<std::int32_t>(syms.size());
  for (std::int32_t i = 0; i < n; ++i) {
    syms[i].prev = i - 1;
    syms[i].next = i + 1 < n ? i + 1 : -1;
  }

  // Min-heap on (rank, position); entries go stale when a neighbour merges and are checked on pop
  // exactly as HF does (the pair now at `pos` must still merge into the same id).
  auto& heap = scratch.heap;
  heap.clear();
  const auto later = [](const MergeScratch::Candidate& a, const MergeScratch::Candidate& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
  };
  for (std::int32_t i = 0; i + 1 < n; ++i) {
    if (const MergeMap::Value* m = merges.find(syms[i].id, syms[i + 1].id)) {
      heap.push_back({m->rank, static_cast<std::uint32_t>(i), m->merged});
    }
  }
  std::make_heap(heap.begin(), heap.end(), later);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const MergeScratch::Candidate top = heap.back();
    heap.pop_back();
    MergeScratch::Symbol& cur = syms[top.pos];
    if (cur.len == 0 || cur.next < 0) continue;
    MergeScratch::Symbol& right = syms[cur.next];
    const MergeMap::Value* m = merges.find(cur.id, right.id);
    if (!m || m->merged != top.merged) continue;

    cur.id = top.merged;
    cur.len += right.len;
    right.len = 0;
    cur.next = right.next;
    if (cur.next >= 0) syms[cur.next].prev = static_cast<std::int32_t>(top.pos);
    if (cur.prev >= 0) {
      if (const MergeMap::Value* p = merges.find(syms[cur.prev].id, cur.id)) {
        heap.push_back({p->rank, static_cast<std::uint32_t>(cur.prev), p->merged});
        std::push_heap(heap.begin(), heap.end(), later);
      }
    }
    if (cur.next >= 0) {
      if (const MergeMap::Value* q = merges.find(cur.id, syms[cur.next].id)) {
        heap.push_back({q->rank, top.pos, q->merged});
        std::push_heap(heap.begin(), heap.end(), later);
      }
    }
  }
  for (std::int32_t i = 0; i >= 0; i = syms[i].next) {
    ids.push_back(syms[i].id);
    lens.push_back(syms[i].len);
  }
}

// ---- WordCache -------------------------------------------------------------------------------

namespace {

std::uint64_t load64(const char* p) {
  std::uint64_t x;
  std::memcpy(&x, p, 8);
  return x;
}

std::uint64_t load32(const char* p) {
  std::uint32_t x;
  std::memcpy(&x, p, 4);
  return x;
}

// Eight bytes at a time; the tail is read with overlapping whole loads (no byte-by-byte copy, which
// stalls the load that follows it). 0 is kept for empty slots.
std::uint64_t word_hash(std::string_view w) {
  constexpr std::uint64_t kMul = 0x9E3779B97F4A7C15ull;
  const char* p = w.data();
  const std::size_t n = w.size();
  std::uint64_t h = n * kMul, x;
  if (n >= 8) {
    std::size_t i = 0;
    for (; i + 8 < n; i += 8) h = mix(h ^ load64(p + i));
    x = load64(p + n - 8);
  } else if (n >= 4) {
    x = load32(p) | (load32(p + n - 4) << 32);
  } else if (n > 0) {
    x = static_cast<unsigned char>(p[0]) | (static_cast<std::uint64_t>(static_cast<unsigned char>(p[n / 2])) << 8) |
        (static_cast<std::uint64_t>(static_cast<unsigned char>(p[n - 1])) << 16);
  } else {
    x = 0;
  }
  h = mix(h ^ x);
  return h ? h : 1;
}

}  // namespace

bool WordCache::find(std::string_view word, const std::int32_t** ids, const std::uint32_t** lens,
                     std::size_t* n) const {
  if (slots_.empty()) return false;
  const std::uint64_t h = word_hash(word);
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t i = static_cast<std::size_t>(h) & mask;; i = (i + 1) & mask) {
    const Slot& s = slots_[i];
    if (s.hash == 0) return false;
    if (s.hash == h && s.key_len == word.size() &&
        std::memcmp(keys_.data() + s.key_off, word.data(), word.size()) == 0) {
      *ids = ids_.data() + s.val_off;
      *lens = lens_.data() + s.val_off;
      *n = s.val_len;
      return true;
    }
  }
}

void WordCache::rehash(std::size_t n_slots) {
  std::vector<Slot> old;
  old.swap(slots_);
  slots_.assign(n_slots, Slot{});
  const std::size_t mask = n_slots - 1;
  for (const Slot& s : old) {
    if (s.hash == 0) continue;
    std::size_t i = static_cast<std::size_t>(s.hash) & mask;
    while (slots_[i].hash != 0) i = (i + 1) & mask;
    slots_[i] = s;
  }
}

void WordCache::insert(std::string_view word, const std::int32_t* ids, const std::uint32_t* lens, std::size_t n) {
  if (word.size() > kMaxWordBytes) return;
  if (size_ >= kMaxEntries) {  // full: start over rather than evict one by one
    slots_.clear();
    keys_.clear();
    ids_.clear();
    lens_.clear();
    size_ = 0;
  }
  if (slots_.empty()) rehash(1024);
  if (2 * (size_ + 1) > slots_.size()) rehash(2 * slots_.size());
  const std::uint64_t h = word_hash(word);
  const std::size_t mask = slots_.size() - 1;
  std::size_t i = static_cast<std::size_t>(h) & mask;
  while (slots_[i].hash != 0) i = (i + 1) & mask;
  Slot& s = slots_[i];
  s.hash = h;
  s.key_off = static_cast<std::uint32_t>(keys_.size());
  s.key_len = static_cast<std::uint32_t>(word.size());
  s.val_off = static_cast<std::uint32_t>(ids_.size());
  s.val_len = static_cast<std::uint32_t>(n);
  keys_.append(word.data(), word.size());
  ids_.insert(ids_.end(), ids, ids + n);
  lens_.insert(lens_.end(), lens, lens + n);
  ++size_;
}

}  // namespace shardft::bpe
