// Writes a ctgrad training checkpoint with known values for read_from_python.py to check.
#include <cmath>
#include <cstdio>

#include <ctgrad/checkpoint/training.hpp>
#include <ctgrad/ctgrad.hpp>

using namespace ctgrad;

constexpr auto model = [] {
  Builder g;
  Value x = g.input("x", {Batch, 3});
  g.loss(sum(matmul(x, g.scope("enc").param("w", {3, 4}, init::zeros())) + g.scope("enc").param("b", {4}, init::zeros())));
  return g;
};
static constexpr auto G = freeze<model>();

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  Program<G> p;
  auto w = p.parameter("enc.w").value;
  auto b = p.parameter("enc.b").value;
  for (int i = 0; i < 12; ++i) w[i] = std::sin(float(i));  // the reader recomputes these
  for (int i = 0; i < 4; ++i) b[i] = -0.5f * float(i);
  p.set_steps(42);
  checkpoint::save_training<float>(argv[1], p, nullptr, {{"config", "{\"model\": \"toy\"}"}});
  return 0;
}
